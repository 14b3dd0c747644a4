"""Live events: what the dashboard streams to browsers over Channels (groups `session.<id>` and `fleet`).

Every durable change is a rollout line, so rollout seqs number the events: one event per append transaction
announces its lines `first_seq`..`seq`, and a client that sees a seq jump (or reconnects) knows it missed something
and re-syncs over HTTP. Progress that is not (yet) durable, such
as a compaction attempt in flight or a stream retry, goes out as a transient event that carries `after_seq`, the
newest seq the client should already have; transient events never advance a client's seq.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

logger = logging.getLogger(__name__)

FLEET_GROUP = "fleet"
MESSAGE_TYPE = "session.event"
LINES_KIND = "rollout.lines"


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


_local = threading.local()


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


def _send(groups: list[str], message: dict[str, Any]) -> None:
    collector = getattr(_local, "collector", None)
    if collector is not None:
        collector.append((groups, message))
        return
    if not _worth_sending(groups):
        return
    if _in_sync_to_async_thread() or _loop_running():
        # One trip into the caller's event loop for every group: each async_to_sync call costs a thread hop.
        async_to_sync(_asend)(groups, message)
    else:
        _thread_loops.run(_asend(groups, message))


@contextmanager
def deferred() -> Iterator[list[tuple[list[str], dict[str, Any]]]]:
    """Collect the events this thread would publish in the block instead of sending them: an async caller that
    ran sync code (e.g. the turn loop's appends) publishes them from its own side with `apublish` afterwards."""
    previous = getattr(_local, "collector", None)
    collected: list[tuple[list[str], dict[str, Any]]] = []
    _local.collector = collected
    try:
        yield collected
    finally:
        _local.collector = previous


async def apublish(collected: list[tuple[list[str], dict[str, Any]]]) -> None:
    """Send events `deferred` collected, in order, from the async side."""
    for groups, message in collected:
        await _asend(groups, message)


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


def publish_lines(*, session_id: int, summary: Mapping[str, Any], lines: list[tuple[int, str, str | None]]) -> None:
    """Publish one event for the new rollout lines of one append to the session's group and the fleet group.

    Called after commit with what the append already knows (no read back). One event per append, not per line:
    a page renders everything up to the summary's `last_seq` on the first event anyway."""
    groups = [session_group(session_id), FLEET_GROUP]
    if lines and _worth_sending(groups):  # before the event is built: its summary is built only for a listener
        _send(groups, lines_event(session_id=session_id, summary=summary, lines=lines))


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


def publish_transient(*, session_id: int, after_seq: int, kind: str, detail: dict[str, Any]) -> None:
    """Publish progress that is not a rollout line (compaction in flight, stream retries, step running)."""
    _send([session_group(session_id), FLEET_GROUP],
          transient_event(session_id=session_id, after_seq=after_seq, kind=kind, detail=detail))


async def apublish_transient(*, session_id: int, after_seq: int, kind: str, detail: dict[str, Any]) -> None:
    """`publish_transient` from async code, without a hop through a sync thread."""
    await _asend([session_group(session_id), FLEET_GROUP],
                 transient_event(session_id=session_id, after_seq=after_seq, kind=kind, detail=detail))


ALERT_KIND = "alert"
# Transient: what the gateway did for an operator (a compaction at the next request), shown on the session page.
GATEWAY_NOTICE = "gateway_notice"


def publish_alert_event(*, session_id: int | None, alert_id: int) -> None:
    """An alert was raised, grew or was acknowledged: the fleet board and the session's page re-render their alerts
    (a fleet storm, with no session, goes to the fleet board only)."""
    groups = [FLEET_GROUP] if session_id is None else [session_group(session_id), FLEET_GROUP]
    _send(groups, {"type": MESSAGE_TYPE, "session_id": session_id, "seq": None, "after_seq": 0,
                   "kind": ALERT_KIND, "summary": None, "detail": {"alert_id": alert_id}})


def on_rollout_appended(sender, *, session_id: int, lines: list, summary: dict[str, Any], **kwargs) -> None:
    publish_lines(session_id=session_id, summary=summary, lines=lines)
