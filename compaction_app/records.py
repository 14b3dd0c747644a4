"""The one writer of the compaction records: Compaction, CompactionAttempt and HookRun rows, and every transition
they go through (tests/compaction_app/test_one_records_writer.py keeps it so).

An attempt is created `running` before the engine runs, so a crash stays visible, and then ends exactly once:

    running -> completed     the compaction was installed (`finish_attempt` with the installed Compaction)
    running -> failed        the provider or the engine failed, or the install was refused (`finish_attempt` with
                             the engine's record, or `fail_attempt` when the engine gave none)
    running -> interrupted   a PreCompact hook stopped it (`finish_attempt`), its caller cancelled it
                             (`cancel_attempt`), or its worker died (`mark_stale_attempts`, called by the lease
                             when it takes an expired lease over: an attempt runs only under its session's lease)
    running -> (deleted)     the engine refused the request before anything ran (`discard_attempt`)

A Compaction row is written when its `compacted` line is installed (`create_compaction`) or imported
(`record_imported_compactions`). Its `rolled_back` flag is a cache of what the rollout says
(sessions_app.compactions.rollback folds the lines); `set_rolled_back` is the one place that changes it. The re-read
tax the alert rules measure after a compaction is added with `add_reread_tokens`.

The callers own the transactions: each function here writes inside whatever transaction the caller holds, so a
compaction's rows land in the same commit as its rollout lines. Each write also applies its change to the analytics
roll-up (compaction_app.rollup, issue 34) in that transaction: the rows' shares before and after the write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from compaction_app import rollup
from compaction_app.engine.analytics import AttemptRecord
from compaction_app.engine.hooks import HookRunRecord
from compaction_app.models import (
    ArchivedDuration,
    ArchivedShare,
    Compaction,
    CompactionAttempt,
    CompactionPolicy,
    HookRun,
)
from compactweb import metrics

STALE_ATTEMPT_MESSAGE = "the worker running this compaction stopped before it finished"
CANCELLED_MESSAGE = "the compaction was cancelled before it finished"
INTERRUPTED_KIND = "interrupted"


def _when(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


@contextmanager
def _rolled_up(shares: Callable[..., rollup.Shares], ids: list[int]) -> Iterator[None]:
    """Around a write of these rows (rollup.attempt_shares or .compaction_shares): their roll-up shares before,
    then the change applied after (not when the write raised: its transaction rolls back anyway)."""
    if not ids:
        yield
        return
    before = shares(ids=ids)
    yield
    rollup.apply(rollup.change(before=before, after=shares(ids=ids)))


def _count_ended(ids: list[int]) -> None:
    """Count attempts that just ended (compactweb.metrics), once their transaction commits."""
    if not ids:
        return
    ended = list(CompactionAttempt.objects.filter(pk__in=ids).exclude(status=CompactionAttempt.Status.RUNNING)
                 .values_list("strategy", "trigger", "status", "duration_ms"))
    transaction.on_commit(lambda: metrics.attempts_ended(ended))


def _count_installed(compaction: Compaction) -> None:
    fields = dict(method=compaction.strategy, tokens_before=compaction.tokens_before,
                  tokens_after=compaction.tokens_after, call_tokens=compaction.call_tokens,
                  probe_tokens=compaction.probe_tokens, retention_score=compaction.retention_score)
    transaction.on_commit(lambda: metrics.compaction_installed(**fields))


# --- attempts ------------------------------------------------------------------------------------------------------


def start_attempt(
    *, session, item_id: str, turn_id: str, trigger: str, reason: str, implementation: str, phase: str,
    strategy: str, tokens_before: int,
) -> CompactionAttempt:
    """The `running` attempt of a compaction about to run, under the session's policy and provider."""
    attempt = CompactionAttempt.objects.create(
        session=session, item_id=item_id, turn_id=turn_id, trigger=trigger, reason=reason,
        implementation=implementation, phase=phase, strategy=strategy, status=CompactionAttempt.Status.RUNNING,
        tokens_before=tokens_before, started_at=timezone.now(), policy_id=session.policy_id,
        provider_id=session.provider_id,
    )
    rollup.apply(rollup.attempt_shares(ids=[attempt.pk]))
    return attempt


def finish_attempt(*, attempt_id: int, record: AttemptRecord, compaction: Compaction | None = None) -> None:
    """End an attempt as the engine recorded it (spec §10): completed with the installed `compaction`, or failed
    or interrupted with the engine's error."""
    with _rolled_up(rollup.attempt_shares, [attempt_id]):
        CompactionAttempt.objects.filter(pk=attempt_id).update(
            compaction=compaction,
            implementation=str(record.implementation),
            status=str(record.status),
            error_kind=record.error_kind or "",
            error_http_status=record.http_status,
            error_message=record.error_message or "",
            tokens_before=record.active_context_tokens_before,
            tokens_after=record.active_context_tokens_after,
            compaction_summary_tokens=record.compaction_summary_tokens,
            cached_input_tokens=record.cached_input_tokens,
            retained_image_count=record.retained_image_count,
            retries=record.retries,
            started_at=_when(record.started_at),
            completed_at=_when(record.completed_at),
            duration_ms=record.duration_ms,
        )
    _count_ended([attempt_id])


def fail_attempt(*, attempt_id: int, kind: str, message: str, http_status: int | None = None) -> None:
    """End an attempt as failed when the engine gave no record (it crashed, or the install was refused)."""
    with _rolled_up(rollup.attempt_shares, [attempt_id]):
        CompactionAttempt.objects.filter(pk=attempt_id).update(
            status=CompactionAttempt.Status.FAILED, error_kind=kind, error_http_status=http_status,
            error_message=message, completed_at=timezone.now(),
        )
    _count_ended([attempt_id])


def cancel_attempt(*, attempt_id: int) -> None:
    """End a still-running attempt as interrupted: its caller (e.g. a stopped turn) gave up on it."""
    with _rolled_up(rollup.attempt_shares, [attempt_id]):
        cancelled = CompactionAttempt.objects.filter(pk=attempt_id, status=CompactionAttempt.Status.RUNNING).update(
            status=CompactionAttempt.Status.INTERRUPTED, error_kind=INTERRUPTED_KIND,
            error_message=CANCELLED_MESSAGE, completed_at=timezone.now(),
        )
    if cancelled:
        _count_ended([attempt_id])


def discard_attempt(*, attempt_id: int) -> None:
    """Remove the attempt of a request the engine refused before anything ran (nothing happened to record)."""
    with _rolled_up(rollup.attempt_shares, [attempt_id]):
        CompactionAttempt.objects.filter(pk=attempt_id).delete()


def mark_stale_attempts(*, session_id: int) -> int:
    """Finish the session's `running` attempts as interrupted (spec §6.5: a killed compaction leaves the history
    unchanged); returns how many there were. Called by the lease when it takes an expired lease over."""
    running = CompactionAttempt.objects.filter(session_id=session_id, status=CompactionAttempt.Status.RUNNING)
    ids = list(running.values_list("pk", flat=True))
    with _rolled_up(rollup.attempt_shares, ids):
        marked = CompactionAttempt.objects.filter(
            session_id=session_id, status=CompactionAttempt.Status.RUNNING,
        ).update(status=CompactionAttempt.Status.INTERRUPTED, error_kind=INTERRUPTED_KIND,
                 error_message=STALE_ATTEMPT_MESSAGE, completed_at=timezone.now())
    _count_ended(ids)
    return marked


def record_hook_runs(*, attempt_id: int, runs: Iterable[HookRunRecord], hook_ids: dict[str, int]) -> None:
    """The hook runs of an attempt (spec §7), with the configured hook they ran when it still exists."""
    HookRun.objects.bulk_create(
        HookRun(
            attempt_id=attempt_id, hook_id=hook_ids.get(run.name), hook_name=run.name, event=str(run.event),
            status=str(run.status), stop_reason=run.stop_reason or "", duration_ms=run.duration_ms,
            output={"response": run.output, "error": run.error},
        )
        for run in runs
    )


# --- compactions ---------------------------------------------------------------------------------------------------


def _made_under(compaction: Compaction) -> None:
    """The policy and model a compaction is made under: its session's, as the row is written."""
    if compaction.policy_id is None:
        compaction.policy_id = compaction.session.policy_id
    if not compaction.model:
        compaction.model = compaction.session.model or ""


def create_compaction(**fields: Any) -> Compaction:
    """The row of a compaction whose `compacted` line was just installed."""
    compaction = Compaction(**fields)
    _made_under(compaction)
    compaction.save(force_insert=True)
    rollup.apply(rollup.compaction_shares(ids=[compaction.pk]))
    _count_installed(compaction)
    return compaction


def record_imported_compactions(*, compactions: list[Compaction]) -> int:
    """The rows of the `compacted` lines of an imported rollout, labelled by the importer; returns how many."""
    for compaction in compactions:
        _made_under(compaction)
    made = Compaction.objects.bulk_create(compactions)  # PostgreSQL and SQLite return the new ids
    rollup.apply(rollup.compaction_shares(ids=[c.pk for c in made]))
    return len(compactions)


def set_rolled_back(*, compaction_ids: Iterable[int], rolled_back: bool) -> None:
    """Cache what a rollback (True) or a redo (False) line just said about these compactions."""
    ids = list(compaction_ids)
    with _rolled_up(rollup.compaction_shares, ids):
        Compaction.objects.filter(pk__in=ids).update(rolled_back=rolled_back)


def set_retention(*, compaction_id: int, retention: dict[str, Any], retention_score: float | None) -> None:
    """The retention score of a compaction scored after the fact (an imported or followed rollout's)."""
    with _rolled_up(rollup.compaction_shares, [compaction_id]):
        Compaction.objects.filter(pk=compaction_id).update(retention=retention, retention_score=retention_score)
    method = Compaction.objects.filter(pk=compaction_id).values_list("strategy", flat=True).first() or ""
    transaction.on_commit(lambda: metrics.compaction_scored(method=method, retention_score=retention_score))


def set_call_tokens(*, compaction_id: int, tokens: int) -> None:
    """What a compaction's model calls spent, learnt after its row was written (a Claude Code compaction's summary
    requests, counted by the transcript's next `cost-state`)."""
    with _rolled_up(rollup.compaction_shares, [compaction_id]):
        Compaction.objects.filter(pk=compaction_id).update(call_tokens=tokens)


def add_cost_tokens(*, compaction_id: int, call_tokens: int = 0, probe_tokens: int = 0) -> None:
    """Add to what a compaction's calls and probes spent, learnt after its row was written (a followed file's usage
    lines that arrive in a later read than their `compacted` line)."""
    with _rolled_up(rollup.compaction_shares, [compaction_id]):
        Compaction.objects.filter(pk=compaction_id).update(call_tokens=F("call_tokens") + call_tokens,
                                                            probe_tokens=F("probe_tokens") + probe_tokens)


def add_reread_tokens(*, compaction_id: int, tokens: int) -> None:
    """Add to the re-read tax measured after a compaction (the alert rules' cost of what it dropped)."""
    with _rolled_up(rollup.compaction_shares, [compaction_id]):
        Compaction.objects.filter(pk=compaction_id).update(reread_tokens=F("reread_tokens") + tokens)


def delete_session_records(*, session_id: int, archive) -> int:
    """Remove every compaction record of a session that retention archived (sessions_app.archive): its hook runs,
    attempts and compactions, in that order (each protects the next). Their share of the analytics roll-up is
    NOT subtracted: it is kept with the archive record (ArchivedShare, ArchivedDuration), so all-time analytics
    still count the session and `rollup.rebuild` (records plus archived shares) gives the same rows. Only the
    archiver calls this, in the transaction that removes the session and writes `archive`. Returns how many
    rows went."""
    share = rollup.session_share(session_id=session_id)
    rollup.apply(rollup.archived_session(archived_at=archive.archived_at))
    stored = ArchivedShare.objects.create(
        archive=archive, session_id=session_id, attempts=share.attempts, compactions=share.compactions
    )
    ArchivedDuration.objects.bulk_create(
        ArchivedDuration(share=stored, policy_id=policy, provider_id=provider, duration_ms=duration, attempts=n)
        for (policy, provider, duration), n in sorted(share.durations.items())
    )
    removed, _ = HookRun.objects.filter(attempt__session_id=session_id).delete()
    more, _ = CompactionAttempt.objects.filter(session_id=session_id).delete()
    removed += more
    more, _ = Compaction.objects.filter(session_id=session_id).delete()
    return removed + more


def restore_archived_compactions(*, archive_id: int, session_id: int) -> int:
    """Move an archived session's compactions back from its ArchivedShare to the restored session's re-imported
    rows, without counting them twice: each re-imported compaction (matched by rollout seq) gets the figures the
    original had (its day, policy, model, tokens, cost, re-read tax, score, flag: the import alone cannot know
    them), their roll-up change is applied, the stored compactions' share subtracted, and the share marked
    restored. The attempts' share stays stored (the file does not carry attempts). Call it in one transaction
    after the restore's import; returns how many compactions were matched. Does nothing for an archive without
    a share, or one restored already."""
    share = ArchivedShare.objects.select_for_update().filter(archive_id=archive_id, restored_at=None).first()
    if share is None:
        return 0
    figures = dict(rollup.stored_figures(share.compactions))
    rows = dict(
        Compaction.objects.filter(session_id=session_id, rollout_seq__in=list(figures)).values_list(
            "rollout_seq", "pk"
        )
    )
    policies = set(
        CompactionPolicy.objects.filter(pk__in={f["policy_id"] for f in figures.values()}).values_list("pk", flat=True)
    )
    with _rolled_up(rollup.compaction_shares, list(rows.values())):
        for seq, pk in rows.items():
            # A policy deleted since keeps no row to point at: the import's (the session's) stays.
            policy = {"policy_id": figures[seq]["policy_id"]} if figures[seq]["policy_id"] in policies else {}
            Compaction.objects.filter(pk=pk).update(
                **policy,
                created_at=figures[seq]["created_at"],
                model=figures[seq]["model"],
                retention_score=figures[seq]["retention_score"],
                tokens_before=figures[seq]["tokens_before"],
                tokens_after=figures[seq]["tokens_after"],
                call_tokens=figures[seq]["call_tokens"],
                probe_tokens=figures[seq]["probe_tokens"],
                reread_tokens=figures[seq]["reread_tokens"],
                flagged=figures[seq]["flagged"],
            )
    stored = rollup.compactions_part(share.compactions)
    rollup.apply(rollup.change(before=stored, after=rollup.Shares()))
    ArchivedShare.objects.filter(pk=share.pk).update(restored_at=timezone.now())
    return len(rows)
