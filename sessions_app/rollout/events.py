"""Live events: what the dashboard streams to browsers over Channels (groups `session.<id>` and `fleet`).

Every durable change is a rollout line, so rollout seqs number the events: one event per append transaction
announces its lines `first_seq`..`seq`, and a client that sees a seq jump (or reconnects) knows it missed something
and re-syncs over HTTP. Progress that is not (yet) durable, such
as a compaction attempt in flight or a stream retry, goes out as a transient event that carries `after_seq`, the
newest seq the client should already have; transient events never advance a client's seq.

The one route of a line event: the append (sessions_app.rollout.services.append_rollout_lines) registers one
`transaction.on_commit` callback (`announce_committed`) that builds the event (`lines_publication`, nothing when
nobody listens) and sends it (`publish`), or hands it to the caller's outbox: async code that ran the append on a sync thread (the
turn) sends its outbox from its own event loop (`apublish`), saving a hop back to the loop per event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

logger = logging.getLogger(__name__)

FLEET_GROUP = "fleet"
MESSAGE_TYPE = "session.event"
LINES_KIND = "rollout.lines"
# The turn loop's own progress, as an earlier release published it: no live page shows it (a turn's rollout lines
# follow as batches), and rendering the status box for each cost three reads per page and event. The loop no longer
# publishes these; a worker of the earlier release still may during a rolling upgrade, so the pages let them pass.
TURN_PROGRESS_KINDS = frozenset({"turn_started", "turn_step", "turn_finished"})

# One event to send: the groups it goes to and the message.
Publication = tuple[list[str], dict[str, Any]]


def session_group(session_id: int) -> str:
    return f"session.{session_id}"


def _listened(layer, groups: list[str]) -> list[str]:
    """The groups worth a send: on the in-memory layer (the embedded default), only groups a page of this process
    joined, since nobody else can receive from it; sending to an empty group still costs it a sweep of every
    channel and an event loop. Any other layer may have listeners in other processes: every group."""
    if isinstance(layer, InMemoryChannelLayer):
        return [group for group in groups if layer.groups.get(group)]
    return groups


async def _asend(groups: list[str], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for group in _listened(layer, groups):
        try:
            await layer.group_send(group, message)
        except Exception:  # a dropped event is recovered by the client's re-sync; never fail the write for it
            logger.exception("could not publish %s to %s", message.get("kind"), group)


class _ThreadLoops(threading.local):
    """One event loop per thread for publishing from code that runs outside any event loop (Celery workers,
    management commands): `async_to_sync` would start a new loop per call there (and the Redis layer would open a
    new connection on each); this one is created once per thread and run in place, with no thread hop."""

    loop: asyncio.AbstractEventLoop | None = None
    pid: int = 0

    def run(self, coro) -> None:
        if self.loop is None or self.loop.is_closed() or self.pid != os.getpid():  # a forked worker gets its own
            self.loop, self.pid = asyncio.new_event_loop(), os.getpid()
        self.loop.run_until_complete(coro)


_thread_loops = _ThreadLoops()


def close_thread_loop() -> None:
    """Close the loop this thread publishes on, if it made one: a short-lived thread should call it before it
    ends, or the garbage collector closes the loop later, on whichever thread it runs on (the Redis layer then
    flushes its connections from inside another running loop, which fails)."""
    loop = _thread_loops.loop
    _thread_loops.loop = None
    if loop is not None and not loop.is_closed():
        loop.close()


def _in_sync_to_async_thread() -> bool:
    """Whether this thread runs for an event loop (asgiref's sync_to_async): async_to_sync then hops to that
    loop, where the channel layer lives, instead of starting one."""
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    return (
        loop is not None and getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) == os.getpid()
        and loop.is_running()
    )


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _worth_sending(groups: list[str]) -> bool:
    layer = get_channel_layer()
    return layer is not None and bool(_listened(layer, groups))


def publish(publication: Publication | None) -> None:
    """Send one event from sync code (nothing for None)."""
    if publication is None:
        return
    groups, message = publication
    if _in_sync_to_async_thread() or _loop_running():
        # One trip into the caller's event loop for every group: each async_to_sync call costs a thread hop.
        async_to_sync(_asend)(groups, message)
    else:
        _thread_loops.run(_asend(groups, message))


async def apublish(publications: Iterable[Publication]) -> None:
    """Send events an append left in its caller's outbox, in order, from the async side."""
    for groups, message in publications:
        await _asend(groups, message)


def _send(groups: list[str], message: dict[str, Any]) -> None:
    if _worth_sending(groups):
        publish((groups, message))


def lines_event(*, session_id: int, summary: Mapping[str, Any], lines: list[tuple[int, str, str | None]]) -> dict:
    """One event for the lines of one append transaction: `seq` is the newest of them, `first_seq` the oldest."""
    return {
        "type": MESSAGE_TYPE,
        "session_id": session_id,
        "seq": lines[-1][0],
        "first_seq": lines[0][0],
        "kind": LINES_KIND,
        "summary": dict(summary),  # a plain dict, as every channel layer and the pages' JSON take it
        "detail": {"lines": [{"seq": seq, "line_kind": kind, "event_type": event} for seq, kind, event in lines]},
    }


def lines_publication(*, session_id: int, summary: Mapping[str, Any],
                      lines: list[tuple[int, str, str | None]]) -> Publication | None:
    """The event for the new rollout lines of one append, to the session's group and the fleet group; None when
    there are no lines or nobody listens (checked before the event is built: its summary is built only for a
    listener).

    Built after commit with what the append already knows (no read back). One event per append, not per line:
    a page renders everything up to the summary's `last_seq` on the first event anyway."""
    groups = [session_group(session_id), FLEET_GROUP]
    if not lines or not _worth_sending(groups):
        return None
    return groups, lines_event(session_id=session_id, summary=summary, lines=lines)


def publish_lines(*, session_id: int, summary: Mapping[str, Any], lines: list[tuple[int, str, str | None]]) -> None:
    """Publish the event for lines committed elsewhere (an import, a followed file written by another process)."""
    publish(lines_publication(session_id=session_id, summary=summary, lines=lines))


def transient_event(*, session_id: int, after_seq: int, kind: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": MESSAGE_TYPE,
        "session_id": session_id,
        "seq": None,
        "after_seq": after_seq,
        "kind": kind,
        "summary": None,
        "detail": detail,
    }


def publish_transient(*, session_id: int, after_seq: int, kind: str, detail: dict[str, Any],
                      fleet: bool = True) -> None:
    """Publish progress that is not a rollout line (compaction in flight, stream retries, step running);
    `fleet=False`: to the session's page only (what no fleet row shows)."""
    groups = [session_group(session_id), FLEET_GROUP] if fleet else [session_group(session_id)]
    _send(groups, transient_event(session_id=session_id, after_seq=after_seq, kind=kind, detail=detail))


async def apublish_transient(*, session_id: int, after_seq: int, kind: str, detail: dict[str, Any]) -> None:
    """`publish_transient` from async code, without a hop through a sync thread."""
    await _asend([session_group(session_id), FLEET_GROUP],
                 transient_event(session_id=session_id, after_seq=after_seq, kind=kind, detail=detail))


ALERT_KIND = "alert"
# Every session page's connection is in this group too: a fleet-wide alert (no session) is on each one's card.
FLEET_ALERTS_GROUP = "fleet-alerts"
# Transient: what the gateway did for an operator (a compaction at the next request), shown on the session page,
# with the gateway card's state after it (`state`: gateway_app.selectors.gateway_state).
GATEWAY_NOTICE = "gateway_notice"
# Transient, to the session's page only: the gateway recorded one more request (`requests`: the count now; with
# `cut` when that request was an exchange cut by its process's end: gateway_app.selectors.cut_state).
GATEWAY_REQUESTS = "gateway_requests"


def publish_alert_event(*, session_id: int | None, alert_id: int) -> None:
    """An alert was raised, grew or was acknowledged: the fleet board and the session's page re-render their alerts
    (a fleet storm, with no session, goes to the fleet board and to every session page, whose card lists the
    fleet's storms too: its count there was not live, issue 47)."""
    groups = [FLEET_GROUP, FLEET_ALERTS_GROUP] if session_id is None else [session_group(session_id), FLEET_GROUP]
    _send(groups, {"type": MESSAGE_TYPE, "session_id": session_id, "seq": None, "after_seq": 0,
                   "kind": ALERT_KIND, "summary": None, "detail": {"alert_id": alert_id}})

