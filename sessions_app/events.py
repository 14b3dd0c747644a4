"""Live events: what the dashboard streams to browsers over Channels (groups `session.<id>` and `fleet`).

Every durable change is a rollout line, so a line's `seq` is the event's sequence number: a client that sees a
seq jump (or reconnects) knows it missed something and re-syncs over HTTP. Progress that is not (yet) durable, such
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


def session_group(session_id: int) -> str:
    return f"session.{session_id}"


def _send(groups: list[str], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for group in groups:
        try:
            async_to_sync(layer.group_send)(group, message)
        except Exception:  # a dropped event is recovered by the client's re-sync; never fail the write for it
            logger.exception("could not publish %s to %s", message.get("kind"), group)


def line_event(*, session_id: int, seq: int, kind: str, summary: dict[str, Any], detail: dict[str, Any]) -> dict:
    return {
        "type": MESSAGE_TYPE,
        "session_id": session_id,
        "seq": seq,
        "kind": kind,
        "summary": summary,
        "detail": detail,
    }


def publish_lines(*, session_id: int, seqs: list[int]) -> None:
    """Publish one event per new rollout line to the session's group and the fleet group (after commit)."""
    from sessions_app import selectors

    if not seqs:
        return
    session = selectors.get_session(session_id=session_id)
    summary = selectors.session_summary(session=session)
    lines = selectors.rollout_lines(session=session, after_seq=min(seqs) - 1)
    for line in lines:
        if line.seq > max(seqs):
            break
        detail = {"line_kind": line.kind, "event_type": line.payload.get("type") if line.kind == "event_msg" else None}
        _send(
            [session_group(session_id), FLEET_GROUP],
            line_event(session_id=session_id, seq=line.seq, kind=line.kind, summary=summary, detail=detail),
        )


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


def on_rollout_appended(sender, *, session_id: int, seqs: list[int], **kwargs) -> None:
    publish_lines(session_id=session_id, seqs=seqs)
