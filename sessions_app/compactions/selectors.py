"""Reads of compactions: lists, the full detail of one (the CompactedItem, its attempts and hook runs, the history
before it and what left the window), attempts, and the aggregates of the analytics page."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from compaction_app.engine.history import Injection
from compaction_app.engine.items import Item
from compaction_app.engine.vocabulary import STRATEGY_MEMENTO
from compaction_app.models import Compaction, CompactionAttempt, HookRun
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p


def list_compactions(*, session_id: int) -> QuerySet[Compaction]:
    """A session's compactions, oldest first (the order of their `compacted` lines)."""
    return Compaction.objects.filter(session_id=session_id).order_by("rollout_seq")


def get_compaction(*, compaction_id: int) -> Compaction:
    """One compaction; raises Compaction.DoesNotExist."""
    return Compaction.objects.select_related("session").get(pk=compaction_id)


def attempts_for(
    *, compaction: Compaction | None = None, session_id: int | None = None, status: str | None = None
) -> QuerySet[CompactionAttempt]:
    """The attempts of one compaction, or of a session (including failed and interrupted ones), newest first."""
    attempts = CompactionAttempt.objects.select_related("session")
    if compaction is not None:
        attempts = attempts.filter(compaction=compaction)
    if session_id is not None:
        attempts = attempts.filter(session_id=session_id)
    if status:
        attempts = attempts.filter(status=status)
    return attempts.order_by("-started_at", "-pk")


def get_attempt(*, attempt_id: int) -> CompactionAttempt:
    """One attempt with its hook runs; raises CompactionAttempt.DoesNotExist."""
    return CompactionAttempt.objects.select_related("session").prefetch_related("hook_runs").get(pk=attempt_id)


def injection_of(compaction: Compaction) -> str:
    """Where the compaction put the initial context (spec §5.3): the mode it recorded, or for a row written
    before that was recorded, the rule's default for its phase."""
    if compaction.injection:
        return compaction.injection
    return Injection.BEFORE_LAST_USER_MESSAGE if compaction.phase == "mid_turn" else Injection.DO_NOT_INJECT


def hook_run_dict(run: HookRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "hook": run.hook_id,
        "name": run.hook_name,
        "event": run.event,
        "status": run.status,
        "stop_reason": run.stop_reason or None,
        "duration_ms": run.duration_ms,
        "output": run.output,
    }


def attempt_dict(attempt: CompactionAttempt, *, hook_runs: Iterable[HookRun] | None = None) -> dict[str, Any]:
    """One attempt with its analytics (spec §10)."""
    runs = attempt.hook_runs.all() if hook_runs is None else hook_runs
    error = None
    if attempt.error_kind or attempt.error_message:
        error = {"kind": attempt.error_kind or None, "http_status": attempt.error_http_status,
                 "message": attempt.error_message}
    return {
        "id": attempt.pk,
        "session": attempt.session_id,
        "compaction": attempt.compaction_id,
        "item_id": attempt.item_id,
        "turn_id": attempt.turn_id,
        "trigger": attempt.trigger,
        "reason": attempt.reason,
        "implementation": attempt.implementation,
        "phase": attempt.phase,
        # compactweb's own choice of method (local / remote_v1 / remote_v2 / token_budget / ...), and Codex's
        # `strategy` analytics field, which is `memento` for every current implementation (spec §10).
        "method": attempt.strategy,
        "strategy": STRATEGY_MEMENTO,
        "status": attempt.status,
        "error": error,
        "tokens_before": attempt.tokens_before,
        "tokens_after": attempt.tokens_after,
        "compaction_summary_tokens": attempt.compaction_summary_tokens,
        "cached_input_tokens": attempt.cached_input_tokens,
        "retained_image_count": attempt.retained_image_count,
        "retries": attempt.retries,
        "started_at": attempt.started_at.isoformat(),
        "completed_at": attempt.completed_at.isoformat() if attempt.completed_at else None,
        "duration_ms": attempt.duration_ms,
        "hook_runs": [hook_run_dict(r) for r in runs],
        "analytics": codex_analytics_event(attempt),
    }


def _unix(moment: datetime | None) -> int | None:
    return int(moment.timestamp()) if moment is not None else None


def codex_analytics_event(attempt: CompactionAttempt) -> dict[str, Any]:
    """The attempt as Codex's `CodexCompactionEvent` names its fields (spec §10), for comparison with Codex's own
    analytics: `strategy` is `memento`, times are unix seconds."""
    return {
        "thread_id": str(attempt.session.thread_id),
        "turn_id": attempt.turn_id or None,
        "trigger": attempt.trigger,
        "reason": attempt.reason,
        "implementation": attempt.implementation,
        "phase": attempt.phase,
        "strategy": STRATEGY_MEMENTO,
        "status": attempt.status,
        "codex_error_kind": attempt.error_kind or None,
        "codex_error_http_status_code": attempt.error_http_status,
        "active_context_tokens_before": attempt.tokens_before,
        "active_context_tokens_after": attempt.tokens_after,
        "retained_image_count": attempt.retained_image_count,
        "compaction_summary_tokens": attempt.compaction_summary_tokens,
        "cached_input_tokens": attempt.cached_input_tokens,
        "started_at": _unix(attempt.started_at),
        "completed_at": _unix(attempt.completed_at),
        "duration_ms": attempt.duration_ms,
    }


def compaction_summary(*, compaction: Compaction) -> dict[str, Any]:
    """The list-row view of a compaction (no histories)."""
    return {
        "id": compaction.pk,
        "session": compaction.session_id,
        "rollout_seq": compaction.rollout_seq,
        "item_id": compaction.item_id,
        "trigger": compaction.trigger,
        "reason": compaction.reason,
        "phase": compaction.phase,
        "implementation": compaction.implementation,
        "method": compaction.strategy,
        "strategy": STRATEGY_MEMENTO,
        "injection": injection_of(compaction),
        "summary": compaction.summary,
        "tokens_before": compaction.tokens_before,
        "tokens_after": compaction.tokens_after,
        "tokens_saved": compaction.tokens_before - compaction.tokens_after,
        "window_number": compaction.window_number,
        "window_id": compaction.window_id,
        "previous_window_id": compaction.previous_window_id or None,
        "first_window_id": compaction.first_window_id,
        "rolled_back": compaction.rolled_back,
        "inferred": dict(compaction.inferred or {}),
        "created_at": compaction.created_at.isoformat(),
        "retention": compaction.retention,
        "probe_retention": compaction.probe_retention,
        "cost": {
            "tokens_freed": compaction.tokens_before - compaction.tokens_after,
            "call_tokens": compaction.call_tokens,
            "probe_tokens": compaction.probe_tokens,
            "reread_tokens": compaction.reread_tokens,
        },
        "flagged": compaction.flagged,
    }


def compaction_listing(*, compaction: Compaction) -> dict[str, Any]:
    """A compaction as the list API shows it: the summary row, the CompactedItem's message and replacement
    history, and the attempts with their hook runs."""
    payload = RolloutLine.objects.values_list("payload", flat=True).get(
        session_id=compaction.session_id, seq=compaction.rollout_seq
    )
    attempts = compaction.attempts.select_related("session").prefetch_related("hook_runs").order_by("started_at", "pk")
    listing = compaction_summary(compaction=compaction)
    listing.update(
        message=payload.get("message", ""),
        replacement_history=payload.get("replacement_history") or [],
        attempts=[attempt_dict(a, hook_runs=a.hook_runs.all()) for a in attempts],
    )
    return listing


def _line(row: RolloutLine) -> p.Line:
    return p.Line(seq=row.seq, kind=row.kind, payload=row.payload, tokens=row.tokens, item_tokens=row.item_tokens)


def history_before(*, session_id: int, seq: int) -> list[p.Entry]:
    """The live history right before rollout line `seq`: the projection fold (spec §8.2) of the lines before it.

    The fold starts at the newest history-installing line before `seq` (everything earlier is replaced by it), so
    the cost is O(lines since the previous compaction), not O(rollout).
    """
    base = (
        RolloutLine.objects.filter(session_id=session_id, seq__lt=seq, kind__in=p.HISTORY_INSTALLING_KINDS)
        .order_by("-seq").values_list("seq", flat=True).first()
    )
    start = base if base is not None else 1
    projection = p.Projection()
    projection.header = p.Header(last_seq=start - 1)
    rows = RolloutLine.objects.filter(session_id=session_id, seq__gte=start, seq__lt=seq).order_by("seq")
    for row in rows.iterator(chunk_size=1000):
        projection.apply(_line(row))
    return projection.entries


def _key(item: Item) -> str:
    return json.dumps(item, sort_keys=True, separators=(",", ":"))


def window_change(before: list[tuple[Item, int]], after: list[tuple[Item, int]]) -> dict[str, Any]:
    """Which items of the old history were kept in the new one (matched by content, each at most once), which
    left the window, and which are new (summary, compaction item, injected context), with token counts."""
    remaining: dict[str, list[int]] = defaultdict(list)
    for index, (item, _) in enumerate(after):
        remaining[_key(item)].append(index)
    kept, left = [], []
    matched: set[int] = set()
    for index, (item, tokens) in enumerate(before):
        slots = remaining.get(_key(item))
        if slots:
            target = slots.pop(0)
            matched.add(target)
            kept.append({"before_index": index, "after_index": target, "tokens": tokens, "item": item})
        else:
            left.append({"before_index": index, "tokens": tokens, "item": item})
    new = [{"after_index": i, "tokens": t, "item": item} for i, (item, t) in enumerate(after) if i not in matched]
    return {
        "kept": kept,
        "left": left,
        "new": new,
        "kept_tokens": sum(k["tokens"] for k in kept),
        "left_tokens": sum(k["tokens"] for k in left),
        "new_tokens": sum(k["tokens"] for k in new),
    }


def compaction_detail(*, compaction: Compaction) -> dict[str, Any]:
    """Everything about one compaction: the CompactedItem (message, replacement history, window fields), token
    figures, the attempts with their analytics and hook runs, the history right before it, and what it changed."""
    line = RolloutLine.objects.get(session_id=compaction.session_id, seq=compaction.rollout_seq)
    payload = line.payload
    replacement = list(payload.get("replacement_history") or [])
    counts = list(line.item_tokens or [0] * len(replacement))
    before = history_before(session_id=compaction.session_id, seq=compaction.rollout_seq)
    attempts = compaction.attempts.select_related("session").prefetch_related("hook_runs").order_by("started_at", "pk")
    detail = compaction_summary(compaction=compaction)
    detail.update(
        message=payload.get("message", ""),
        compacted_item={k: v for k, v in payload.items() if k != "replacement_history"},
        replacement_history=replacement,
        replacement_tokens=counts,
        before_history=[e.item for e in before],
        before_tokens=[e.tokens for e in before],
        window_change=window_change([(e.item, e.tokens) for e in before], list(zip(replacement, counts, strict=True))),
        attempts=[attempt_dict(a, hook_runs=a.hook_runs.all()) for a in attempts],
        hook_runs=[hook_run_dict(r) for a in attempts for r in a.hook_runs.all()],
    )
    return detail


def percentile(sorted_values: list[int], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return float(sorted_values[rank - 1])


# The analytics dimensions: `method` is compactweb's choice, `strategy` Codex's analytics field (spec §10).
ANALYTICS_DIMENSIONS = ("trigger", "reason", "implementation", "phase", "method", "strategy", "status")


def compaction_analytics(
    *, policy_id: int | None = None, provider_id: int | None = None, since: datetime | None = None
) -> dict[str, Any]:
    """Aggregates for the analytics page over attempts (spec §10): counts by trigger, reason, implementation,
    phase and status, per day; tokens saved by completed attempts; failure rate; latency percentiles."""
    attempts = CompactionAttempt.objects.all()
    if policy_id is not None:
        attempts = attempts.filter(session__policy_id=policy_id)
    if provider_id is not None:
        attempts = attempts.filter(session__provider_id=provider_id)
    if since is not None:
        attempts = attempts.filter(started_at__gte=since)
    rows = list(attempts.values(
        "started_at", "trigger", "reason", "implementation", "phase", "strategy", "status", "tokens_before",
        "tokens_after", "duration_ms",
    ))
    for row in rows:
        # The stored column holds compactweb's method; Codex's `strategy` is `memento` for all of them (§10).
        row["method"], row["strategy"] = row["strategy"], STRATEGY_MEMENTO
    dimensions = ANALYTICS_DIMENSIONS
    totals = {d: dict(Counter(r[d] for r in rows)) for d in dimensions}
    per_day: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        day = per_day.setdefault(row["started_at"].date().isoformat(), {d: {} for d in dimensions})
        for d in dimensions:
            day[d][row[d]] = day[d].get(row[d], 0) + 1
    finished = [r for r in rows if r["status"] != CompactionAttempt.Status.RUNNING]
    failed = [r for r in finished if r["status"] == CompactionAttempt.Status.FAILED]
    completed = [r for r in finished if r["status"] == CompactionAttempt.Status.COMPLETED]
    saved = [r["tokens_before"] - (r["tokens_after"] or 0) for r in completed]
    durations = sorted(r["duration_ms"] for r in finished if r["duration_ms"] is not None)
    return {
        "attempts": len(rows),
        "totals": totals,
        "per_day": dict(sorted(per_day.items())),
        "tokens_saved": sum(saved),
        "tokens_saved_mean": (sum(saved) / len(saved)) if saved else None,
        "failure_rate": (len(failed) / len(finished)) if finished else None,
        "latency_ms": {"p50": percentile(durations, 50), "p90": percentile(durations, 90),
                       "p99": percentile(durations, 99), "count": len(durations)},
    }
