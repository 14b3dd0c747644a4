"""Live events: what the dashboard streams to browsers over Channels (groups `session.<id>` and `fleet`).

Every durable change is a rollout line, so rollout seqs number the events: one event per append transaction
announces its lines `first_seq`..`seq`, and a client that sees a seq jump (or reconnects) knows it missed something
and re-syncs over HTTP. Progress that is not (yet) durable, such
as a compaction attempt in flight or a stream retry, goes out as a transient event that carries `after_seq`, the
newest seq the client should already have; transient events never advance a client's seq.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

FLEET_GROUP = "fleet"
MESSAGE_TYPE = "session.event"
LINES_KIND = "rollout.lines"


def session_group(session_id: int) -> str:
    return f"session.{session_id}"


def _send(groups: list[str], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return

    async def send_all() -> None:
        for group in groups:
            try:
                await layer.group_send(group, message)
            except Exception:  # a dropped event is recovered by the client's re-sync; never fail the write for it
                logger.exception("could not publish %s to %s", message.get("kind"), group)

    # One trip into the event loop for every group: each async_to_sync call costs a thread hop.
    async_to_sync(send_all)()


def lines_event(*, session_id: int, summary: dict[str, Any], lines: list[tuple[int, str, str | None]]) -> dict:
    """One event for the lines of one append transaction: `seq` is the newest of them, `first_seq` the oldest."""
    return {
        "type": MESSAGE_TYPE,
        "session_id": session_id,
        "seq": lines[-1][0],
        "first_seq": lines[0][0],
        "kind": LINES_KIND,
        "summary": summary,
        "detail": {"lines": [{"seq": seq, "line_kind": kind, "event_type": event} for seq, kind, event in lines]},
    }


def publish_lines(*, session_id: int, summary: dict[str, Any], lines: list[tuple[int, str, str | None]]) -> None:
    """Publish one event for the new rollout lines of one append to the session's group and the fleet group.

    Called after commit with what the append already knows (no read back). One event per append, not per line:
    a page renders everything up to the summary's `last_seq` on the first event anyway."""
    if not lines:
        return
    _send([session_group(session_id), FLEET_GROUP], lines_event(session_id=session_id, summary=summary, lines=lines))


def publish_transient(*, session_id: int, after_seq: int, kind: str, detail: dict[str, Any]) -> None:
    """Publish progress that is not a rollout line (compaction in flight, stream retries, step running)."""
    _send(
        [session_group(session_id), FLEET_GROUP],
        {
            "type": MESSAGE_TYPE,
            "session_id": session_id,
            "seq": None,
            "after_seq": after_seq,
            "kind": kind,
            "summary": None,
            "detail": detail,
        },
    )


def on_rollout_appended(sender, *, session_id: int, lines: list, summary: dict[str, Any], **kwargs) -> None:
    publish_lines(session_id=session_id, summary=summary, lines=lines)
