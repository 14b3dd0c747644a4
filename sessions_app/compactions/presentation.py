"""Compactions as the API and the pages show them: the list row, the full detail of one (the CompactedItem, its
attempts and hook runs as rows, the history before it and what left the window). The shapes are the serializers'
(sessions_app/web/api/compaction_serializers.py); this gathers what they show."""

from __future__ import annotations

from typing import Any

from compaction_app.engine.history import Injection
from compaction_app.engine.vocabulary import STRATEGY_MEMENTO, Phase
from compaction_app.engine.window_change import window_change
from compaction_app.models import Compaction
from sessions_app.compactions.roi import compaction_roi, session_net
from sessions_app.compactions.selectors import history_before
from sessions_app.models import RolloutLine


def injection_of(compaction: Compaction) -> str:
    """Where the compaction put the initial context (spec §5.3): the mode it recorded, or for a row written
    before that was recorded, the rule's default for its phase."""
    if compaction.injection:
        return compaction.injection
    return Injection.BEFORE_LAST_USER_MESSAGE if compaction.phase == Phase.MID_TURN else Injection.DO_NOT_INJECT


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
        "prompt": ({"name": compaction.prompt_name, "version": compaction.prompt_version}
                   if compaction.prompt_version else None),
        "tokens_before": compaction.tokens_before,
        "tokens_after": compaction.tokens_after,
        "tokens_freed": compaction.tokens_freed,
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
            "tokens_freed": compaction.tokens_freed,
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
        attempts=list(attempts),  # rows: AttemptSerializer is their one shape
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
    detail["cost"].update(compaction_roi(compaction=compaction))
    detail["session_net"] = session_net(session_id=compaction.session_id)
    detail.update(
        message=payload.get("message", ""),
        compacted_item={k: v for k, v in payload.items() if k != "replacement_history"},
        replacement_history=replacement,
        replacement_tokens=counts,
        before_history=[e.item for e in before],
        before_tokens=[e.tokens for e in before],
        window_change=window_change([(e.item, e.tokens) for e in before], list(zip(replacement, counts, strict=True))),
        attempts=list(attempts),  # rows: AttemptSerializer and HookRunSerializer are their one shape
        hook_runs=[r for a in attempts for r in a.hook_runs.all()],
    )
    return detail
