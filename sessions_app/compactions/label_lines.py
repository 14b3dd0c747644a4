"""What a compaction's labels are, written into its rollout, so an export and re-import keeps them (issue 44).

A Codex rollout says nothing of how a compaction was triggered: an importer infers the trigger, reason and phase
from the turns around the `compacted` line (sessions_app.codex_rollout.labels). A session recorded through the
gateway has no turn lines to infer them from (Claude Code sends none), so the gateway writes them: an `event_msg`
`compaction_labels` line with the compaction's `trigger`, `reason`, `phase` and the evidence for them
(`inferred`). Append-only: a label that changes later (compactweb mode learns a compaction was Claude Code's
`/compact` only at the next request) is a new line naming the compaction by the window it opened (`window_id`,
`window_number`); a line that names no window is the labels of the `compacted` line before it. The newest line
for a compaction wins. Import and follow read them over what the rollout's turns suggest (`labels_by_seq`).

The payload is `{"type": "compaction_labels", "trigger", "reason", "phase", "inferred": {field: evidence},
"window_id"?, "window_number"?}`; an importer takes only vocabulary values (a line with anything else is ignored,
as Codex ignores an event type it does not know).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from compaction_app.engine.vocabulary import Phase, Reason, Trigger
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import NewLine

COMPACTION_LABELS = "compaction_labels"
_EVIDENCE_CHARS = 2000


def labels_line(*, trigger: str, reason: str, phase: str, inferred: dict[str, str] | None = None,
                window_id: str = "", window_number: int = 0) -> NewLine:
    """The labels of a compaction: of the `compacted` line right before it, or of the one that opened `window_id`."""
    payload: dict[str, Any] = {"type": COMPACTION_LABELS, "trigger": trigger, "reason": reason, "phase": phase,
                               "inferred": {k: str(v) for k, v in (inferred or {}).items()
                                            if k in ("trigger", "reason", "phase")}}
    if window_id:
        payload["window_id"] = window_id
    if window_number:
        payload["window_number"] = window_number
    return NewLine(p.EVENT_MSG, payload)


def _valid(payload: Any) -> dict[str, Any] | None:
    """The labels a line gives, or None for one an importer must not take (hand-written, another writer's)."""
    if not isinstance(payload, dict):
        return None
    trigger, reason, phase = payload.get("trigger"), payload.get("reason"), payload.get("phase")
    if trigger not in set(Trigger) or reason not in set(Reason) or phase not in set(Phase):
        return None
    inferred = payload.get("inferred")
    evidence = ({k: v[:_EVIDENCE_CHARS] for k, v in inferred.items()
                 if k in ("trigger", "reason", "phase") and isinstance(v, str)}
                if isinstance(inferred, dict) else {})
    return {"trigger": str(trigger), "reason": str(reason), "phase": str(phase), "inferred": evidence}


def labels_by_seq(*, session_id: int, compacted: dict[int, tuple[str, int]]) -> dict[int, dict[str, Any]]:
    """compacted seq -> the newest labels the rollout's `compaction_labels` lines give it. `compacted` maps each
    compaction's `compacted` seq to its (window_id, window_number)."""
    if not compacted:
        return {}
    every = list(RolloutLine.objects.filter(session_id=session_id, kind=p.COMPACTED).order_by("seq")
                 .values_list("seq", flat=True))
    by_window = {window_id: seq for seq, (window_id, _) in compacted.items() if window_id}
    by_number = {number: seq for seq, (_, number) in sorted(compacted.items()) if number}
    found: dict[int, dict[str, Any]] = {}
    for seq, payload in (RolloutLine.objects.filter(session_id=session_id, kind=p.EVENT_MSG,
                                                    payload__type=COMPACTION_LABELS)
                         .order_by("seq").values_list("seq", "payload")):
        labels = _valid(payload)
        if labels is None:
            continue
        if payload.get("window_id"):
            owner = by_window.get(payload["window_id"])
        elif isinstance(payload.get("window_number"), int) and not isinstance(payload["window_number"], bool):
            owner = by_number.get(payload["window_number"])
        else:
            before = bisect_right(every, seq) - 1
            owner = every[before] if before >= 0 else None
        if owner in compacted:
            found[owner] = labels
    return found
