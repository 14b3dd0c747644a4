"""Reads of what a turn wrote."""

from __future__ import annotations

from compaction_app.engine.items import Item
from sessions_app.models import RolloutLine
from sessions_app.rollout.projection import RESPONSE_ITEM


def turn_items(*, session_id: int, first_seq: int, last_seq: int) -> list[Item]:
    """The items a turn appended (its `response_item` lines), in order."""
    if not first_seq:
        return []
    return list(
        RolloutLine.objects.filter(session_id=session_id, kind=RESPONSE_ITEM, seq__gte=first_seq, seq__lte=last_seq)
        .order_by("seq")
        .values_list("payload", flat=True)
    )

