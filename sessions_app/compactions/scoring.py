"""Retention scores for compactions compactweb did not run itself (an imported or followed Codex rollout, a
session another writer fills): the rollout is folded once, and at each `compacted` line whose row has no score the
history right before and right after it are scored like a live compaction (the pins in force at that line, the
facts the previous compaction held). Runs in the background (`tasks.score_session_task`), never on an import's
path."""

from __future__ import annotations

from compaction_app import records
from compaction_app.engine.pins import PIN_EVENTS, fold_pins
from compaction_app.engine.retention.score import carried_facts, score_compaction
from compaction_app.models import Compaction
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p


def unscored_compactions(*, session_id: int) -> dict[int, int]:
    """rollout seq -> id of the session's compactions that have no retention score yet."""
    return dict(Compaction.objects.filter(session_id=session_id, retention__isnull=True)
                .values_list("rollout_seq", "pk"))


def do_score_session(*, session_id: int) -> int:
    """Score every unscored compaction of a session from its rollout; returns how many were scored."""
    unscored = unscored_compactions(session_id=session_id)
    if not unscored:
        return 0
    stored = dict(Compaction.objects.filter(session_id=session_id, retention__isnull=False)
                  .values_list("rollout_seq", "retention"))
    last = max(unscored)
    projection = p.Projection()
    pin_events: list[dict] = []
    carried = []
    scored = 0
    rows = (RolloutLine.objects.filter(session_id=session_id, seq__lte=last).order_by("seq")
            .values_list("seq", "kind", "payload", "tokens", "item_tokens"))
    for seq, kind, payload, tokens, item_tokens in rows.iterator(chunk_size=2000):
        line = p.Line(seq=seq, kind=kind, payload=payload, tokens=tokens, item_tokens=item_tokens)
        if kind == p.EVENT_MSG and isinstance(payload, dict) and payload.get("type") in PIN_EVENTS:
            pin_events.append(payload)
        if kind != p.COMPACTED:
            projection.apply(line)
            continue
        before = projection.items
        projection.apply(line)
        if seq in unscored:
            pins = [pin.fact() for pin in fold_pins(pin_events)]
            score = score_compaction(before, projection.items, pins=pins, carried=carried)
            retention = score.to_dict()
            records.set_retention(compaction_id=unscored[seq], retention=retention, retention_score=score.score)
            scored += 1
        else:
            retention = stored.get(seq)
        carried = carried_facts(retention)
    return scored
