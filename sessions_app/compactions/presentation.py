"""Compactions as the API and the pages show them: the list row, the full detail of one (the CompactedItem, its
attempts and hook runs as rows, the history before it and what left the window). The shapes are the serializers'
(sessions_app/web/api/compaction_serializers.py), which read the Compaction row itself as they read attempts;
this gathers what the row does not hold (its rollout line, the history before it, its net) onto the row."""

from __future__ import annotations

from compaction_app.engine.history import Injection
from compaction_app.engine.vocabulary import Phase
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


def compaction_listing(*, compaction: Compaction) -> Compaction:
    """A compaction as the list API shows it: the row, with its CompactedItem's message and replacement history
    and its attempts (with their hook runs) as rows."""
    payload = RolloutLine.objects.values_list("payload", flat=True).get(
        session_id=compaction.session_id, seq=compaction.rollout_seq
    )
    compaction.message = payload.get("message", "")
    compaction.replacement_history = payload.get("replacement_history") or []
    compaction.attempt_rows = list(
        compaction.attempts.select_related("session").prefetch_related("hook_runs").order_by("started_at", "pk"))
    return compaction


def compaction_detail(*, compaction: Compaction) -> Compaction:
    """Everything about one compaction, on its row: the CompactedItem (message, replacement history, window
    fields), its net (`roi`), the attempts with their analytics and hook runs, the history right before it, and
    what it changed."""
    line = RolloutLine.objects.get(session_id=compaction.session_id, seq=compaction.rollout_seq)
    payload = line.payload
    replacement = list(payload.get("replacement_history") or [])
    counts = list(line.item_tokens or [0] * len(replacement))
    before = history_before(session_id=compaction.session_id, seq=compaction.rollout_seq)
    attempts = list(
        compaction.attempts.select_related("session").prefetch_related("hook_runs").order_by("started_at", "pk"))
    compaction.roi = compaction_roi(compaction=compaction)
    compaction.session_net = session_net(session_id=compaction.session_id)
    compaction.message = payload.get("message", "")
    compaction.compacted_item = {k: v for k, v in payload.items() if k != "replacement_history"}
    compaction.replacement_history = replacement
    compaction.replacement_tokens = counts
    compaction.before_history = [e.item for e in before]
    compaction.before_tokens = [e.tokens for e in before]
    compaction.window_change = window_change(
        [(e.item, e.tokens) for e in before], list(zip(replacement, counts, strict=True)))
    compaction.attempt_rows = attempts  # AttemptSerializer and HookRunSerializer are their one shape
    compaction.hook_run_rows = [r for a in attempts for r in a.hook_runs.all()]
    return compaction
