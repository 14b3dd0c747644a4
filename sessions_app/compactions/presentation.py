"""Compactions and attempts as the API and the pages show them: the list row, the full detail of one (the
CompactedItem, its attempts and hook runs, the history before it and what left the window), an attempt with
Codex's analytics event."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from compaction_app.engine.history import Injection
from compaction_app.engine.vocabulary import STRATEGY_MEMENTO, Phase
from compaction_app.engine.window_change import window_change
from compaction_app.models import Compaction, CompactionAttempt, HookRun
from sessions_app.compactions.selectors import history_before
from sessions_app.models import RolloutLine


def injection_of(compaction: Compaction) -> str:
    """Where the compaction put the initial context (spec §5.3): the mode it recorded, or for a row written
    before that was recorded, the rule's default for its phase."""
    if compaction.injection:
        return compaction.injection
    return Injection.BEFORE_LAST_USER_MESSAGE if compaction.phase == Phase.MID_TURN else Injection.DO_NOT_INJECT


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
