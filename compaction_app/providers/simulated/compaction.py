"""Server-side compaction as the simulator does it: `/responses/compact` (v1) and the v2 trigger (spec §4.2, §4.3).

Like OpenAI's server, the replacement keeps the user messages (not developer messages, injected context or tool
traffic) and appends one `compaction` item. Its `encrypted_content` carries the extractive digest of everything
that was sent, so the simulator can remember it later.
"""

from __future__ import annotations

from typing import Any

from compaction_app.engine.items import is_user_turn_boundary
from compaction_app.providers.simulated import codec
from compaction_app.providers.simulated.replies import short_id
from compaction_app.providers.simulated.summarizer import digest, render

TRIGGER = "compaction_trigger"


def compaction_item(items: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """One compaction item for `items` and the summary text it stands for."""
    d = digest(items, drop_prompt=False)
    summary = render(d)
    content = codec.encode({"kind": "compaction", "digest": d.to_payload(), "summary": summary})
    return {"type": "compaction", "id": short_id("cmp", content), "encrypted_content": content}, summary


def retained_user_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User messages that are not injected context, in order, copied as they were sent."""
    return [item for item in items if is_user_turn_boundary(item)]


def compact_output(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The `output` array of `/responses/compact`: retained user messages, then one compaction item."""
    item, summary = compaction_item(items)
    return [*retained_user_messages(items), item], summary


def trigger_position_error(items: list[dict[str, Any]]) -> str | None:
    """The server rejects a `compaction_trigger` that is not the final input item (spec §4.3 step 3)."""
    positions = [i for i, item in enumerate(items) if item.get("type") == TRIGGER]
    if not positions:
        return None
    if positions != [len(items) - 1]:
        return "compaction_trigger must appear once, as the final input item"
    return None


def is_v2_request(items: list[dict[str, Any]]) -> bool:
    return bool(items) and items[-1].get("type") == TRIGGER
