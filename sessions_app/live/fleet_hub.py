"""The fleet group's one member per web process: it receives each fleet event once and hands it, in process, only to
the boards that show its row.

Every fleet board used to join the `fleet` group itself, so every event reached every board of every process through
the channel layer (50 boards: 50 deliveries per event, most of them for rows the board does not show; with Redis, 50
copies written and read back) and each board looked at it (docs/benchmarks.md, "Board p99"). The hub of a process
(one per event loop and channel layer) joins the group while any board of the process is open, and keeps an index
of the rows each board holds:

- a line or transient event goes to the boards holding its session's row, and to a board with room at the end of
  the fleet (the last page) that the session joins: its rows are fixed when it renders (sessions_app.fleet.paging),
  so no other session enters a page;
- a change of state anywhere (or an event that does not tell the state: a new session, progress) flags every board's
  header counts (each board re-reads them at most once per second, shared by filter);
- an alert flags every board's alerts card.

A board registers once it is serving (its rows known) and unregisters when it closes; the rows it drops (a session
that no longer matches its filter) leave the index through `remove_rows`. Every call here runs on the process's
event loop, so the index needs no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from sessions_app.live.cancelling import cancel_until_done
from sessions_app.rollout.events import ALERT_KIND, FLEET_GROUP, MESSAGE_TYPE, TURN_PROGRESS_KINDS

logger = logging.getLogger(__name__)

RETRY_SECONDS = 1.0  # after a failed receive (Redis away): its boards close with 4013 and reconnect meanwhile


class Board(Protocol):
    """What the hub needs of a fleet board (sessions_app.live.consumers.FleetConsumer). All calls are quick and
    synchronous: a board only notes what changed and renders later, on its own."""

    page_rows: set[int]

    def joins_the_page(self, session_id: int, summary: Mapping[str, Any] | None) -> bool: ...

    def row_event(self, session_id: int, event: dict[str, Any], summary: Mapping[str, Any] | None) -> None: ...

    def counts_changed(self) -> None: ...

    def alerts_changed(self) -> None: ...

    def layer_failed(self) -> None: ...


class FleetHub:
    def __init__(self, layer) -> None:
        self.layer = layer
        self.channel: str | None = None  # the hub's member of the fleet group, while it is held
        self.holders = 0  # boards between `hold` (before their first read) and `release`
        self._lock = asyncio.Lock()
        self._receiver: asyncio.Task | None = None
        self._refresher: asyncio.Task | None = None
        self.boards: set[Board] = set()
        self.by_row: dict[int, set[Board]] = {}
        self.open_ended: set[Board] = set()  # boards a new session may join (the fleet's last page, with room)
        self.states: dict[int, str] = {}  # each session's last state seen, to notice a change of the counts

    # --- membership of the fleet group ---------------------------------------------------------------------------

    async def hold(self) -> None:
        """Be a member of the fleet group from now on (the first holder joins it). A board holds the hub before its
        first read, as it joined the group itself before: an event published meanwhile is covered by what the read
        sees or arrives later. Raises the layer's error (Redis down) without holding anything."""
        async with self._lock:
            if self.channel is None:
                channel = await self.layer.new_channel()
                await self.layer.group_add(FLEET_GROUP, channel)
                self.channel = channel
                self._receiver = asyncio.ensure_future(self._receive(channel))
                self._refresher = asyncio.ensure_future(self._keep_membership(channel))
            self.holders += 1

    async def release(self) -> None:
        """The end of a `hold`: the last holder leaves the group, so a process without a board receives nothing
        (and on the in-memory layer, nothing is even built for the fleet: sessions_app.rollout.events)."""
        async with self._lock:
            self.holders -= 1
            if self.holders > 0 or self.channel is None:
                return
            channel, receiver, refresher = self.channel, self._receiver, self._refresher
            self.channel = self._receiver = self._refresher = None
            self.states.clear()
            if refresher is not None:
                refresher.cancel()
            try:
                await self.layer.group_discard(FLEET_GROUP, channel)
            except Exception:  # Redis down: the membership expires by itself (group expiry)
                logger.info("the fleet hub could not leave the fleet group; the membership expires by itself")
            if receiver is not None:
                await cancel_until_done(receiver)

    async def _keep_membership(self, channel: str) -> None:
        interval = float(getattr(self.layer, "group_expiry", 86400)) / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self.layer.group_add(FLEET_GROUP, channel)
            except Exception:  # the receive fails too, and the boards close with 4013
                logger.warning("the fleet hub could not refresh its membership of the fleet group")

    async def _receive(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError from exc  # redis-py turned the cancellation into an error
                logger.warning("the fleet hub's channel layer failed (%s); its boards close with try-again",
                               type(exc).__name__)
                for board in list(self.boards):
                    board.layer_failed()
                await asyncio.sleep(RETRY_SECONDS)
                # A restarted Redis forgot the group: join again at once rather than at the next refresh (a board
                # that reconnects meanwhile finds the hub held and joins nothing itself).
                with contextlib.suppress(Exception):
                    await self.layer.group_add(FLEET_GROUP, channel)
                continue
            try:
                self.dispatch(message)
            except Exception:  # one bad event must not stop the board's live updates
                logger.exception("could not dispatch a fleet event")

    # --- the boards and their rows ---------------------------------------------------------------------------------

    def register(self, board: Board, *, open_ended: bool) -> None:
        """A serving board and the rows it holds; `open_ended`: a new session may join it (sessions_app.live.consumers
        FleetConsumer.joins_the_page)."""
        self.boards.add(board)
        for session_id in board.page_rows:
            self.by_row.setdefault(session_id, set()).add(board)
        if open_ended:
            self.open_ended.add(board)

    def unregister(self, board: Board) -> None:
        if board not in self.boards:
            return  # never registered (refused, or closed before serving)
        self.boards.discard(board)
        self.open_ended.discard(board)
        for session_id in board.page_rows:
            self._unindex(board, session_id)

    def add_row(self, board: Board, session_id: int) -> None:
        board.page_rows.add(session_id)
        if board in self.boards:
            self.by_row.setdefault(session_id, set()).add(board)

    def remove_rows(self, board: Board, session_ids: Iterable[int]) -> None:
        for session_id in session_ids:
            board.page_rows.discard(session_id)
            self._unindex(board, session_id)

    def _unindex(self, board: Board, session_id: int) -> None:
        holders = self.by_row.get(session_id)
        if holders is not None:
            holders.discard(board)
            if not holders:
                del self.by_row[session_id]

    def dispatch(self, event: dict[str, Any]) -> None:
        """Hand one fleet event to the boards it concerns."""
        if event.get("type") != MESSAGE_TYPE:
            return
        kind = event.get("kind")
        if event.get("seq") is None and kind in TURN_PROGRESS_KINDS:
            return  # no summary, no change to a row or its last compaction
        if kind == ALERT_KIND:
            for board in list(self.boards):
                board.alerts_changed()
            return
        session_id = int(event["session_id"])
        summary = event.get("summary")
        state = summary.get("state") if summary is not None else None
        if state is None or self.states.get(session_id) != state:  # a new session, a change, or one not told
            if state is not None:
                self.states[session_id] = state
            for board in list(self.boards):
                board.counts_changed()
        for board in list(self.open_ended):
            if session_id not in board.page_rows and board.joins_the_page(session_id, summary):
                self.add_row(board, session_id)
        for board in list(self.by_row.get(session_id, ())):
            board.row_event(session_id, event, summary)


# One hub per event loop (Daphne runs one per process; each test has its own) and channel layer.
_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, FleetHub]] = weakref.WeakKeyDictionary()


def hub_for(layer) -> FleetHub:
    """The running event loop's hub for `layer`."""
    hubs = _hubs.setdefault(asyncio.get_running_loop(), {})
    hub = hubs.get(id(layer))
    if hub is None or hub.layer is not layer:
        hub = hubs[id(layer)] = FleetHub(layer)
    return hub
