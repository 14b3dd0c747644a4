"""Websocket consumers of the live pages: one session (`ws/sessions/<id>/`) and the fleet (`ws/fleet/`).

Both authenticate from the session cookie (compactweb.ws_auth, wired in compactweb.asgi) and always accept and then
close a refused connection, so the browser sees why: 4401 for an anonymous user, 4403 for a user without the
operator role, 4404 for an unknown session, and 4013 ("try again later", like 1013; the page reconnects with
backoff) when the channel layer (Redis) does not answer, at the handshake or later, or the database does not
answer at the handshake (a failed handshake leaves its groups at once). Rendering lives in sessions_app.live.render; the
consumers only decide what to render and when.

Bounded work per connection: a connect is one group join (a fleet board's: its process's fleet hub joins the
fleet group for the first board only, sessions_app.live.fleet_hub) and then one read on the connect pool
(CONNECT_THREADS) that loads the user from the session, checks the role and reads what the first message needs
(the session's thread id and newest seq; the fleet's provider and policy names), whatever the session's length:
one thread hop and one database connection (compactweb.ws_auth explains why the user lookup moved here). A page
without a session cookie is refused before any of it. Rendering batches and fleet rows runs on another pool
(RENDER_THREADS). Neither queues on Django's one sync thread, and both keep their threads' database connections
while calls are waiting (sessions_app.live.pools). Group membership is refreshed every third of the
layer's group expiry, so a live page stays subscribed while the channels of a dead web process fall out of every
group within the expiry (compactweb/settings.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from compaction_app.engine.lru import Lru
from compactweb import db_outage, ws_auth, ws_revocation
from compactweb.roles import OPERATOR, has_role
from sessions_app.fleet.filter import FleetFilter
from sessions_app.fleet.paging import PAGE_SIZE, FleetPage
from sessions_app.live import render as live_render
from sessions_app.live import selectors as live_selectors
from sessions_app.live.cancelling import cancel_until_done
from sessions_app.live.fleet_hub import FleetHub, hub_for
from sessions_app.live.pools import DatabaseThreads
from sessions_app.models import Session
from sessions_app.rollout import projection, selectors
from sessions_app.rollout.events import ALERT_KIND, FLEET_ALERTS_GROUP, TURN_PROGRESS_KINDS, session_group

logger = logging.getLogger(__name__)

CLOSE_ANONYMOUS = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# "Try again later": the application-range twin of 1013, which Daphne's websocket library refuses to send
# (a server may close only with 1000 or 3000-4999); static/js/live.js reconnects on it with backoff.
CLOSE_TRY_AGAIN = 4013
RENDER_THREADS = 4
CONNECT_THREADS = 2


# Renders and connects each have a pool of their own (sessions_app.live.pools: connections kept while busy): a
# burst of pages connecting at once never waits behind renders, nor on Django's one sync thread.
_render_pool = DatabaseThreads(threads=RENDER_THREADS, name="live-render")
_connect_pool = DatabaseThreads(threads=CONNECT_THREADS, name="live-connect")


def close_pool_connections() -> None:
    """Close the render and connect pools' database connections now (they close by themselves once idle)."""
    _render_pool.close_connections()
    _connect_pool.close_connections()


def in_render_pool(function):
    """`function` as a coroutine run on the render pool."""
    return _render_pool.run(function)


def in_connect_pool(function):
    return _connect_pool.run(function)


_batches_in_flight: dict[tuple[str, int], asyncio.Future] = {}


async def shared_batch(*, session_id: int, thread_id: str, after_seq: int) -> tuple[str, int]:
    """live_render.session_batch, read once for all the pages of this process waiting for the same batch: the
    others await the first one's database trip instead of queueing their own on the database thread. The batch
    reaches the session's newest seq, so a page that fell behind catches up in one message."""
    key = (thread_id, after_seq)
    future = _batches_in_flight.get(key)
    if future is None:
        future = asyncio.ensure_future(
            in_render_pool(live_render.session_batch)(session_id=session_id, after_seq=after_seq)
        )
        _batches_in_flight[key] = future
        future.add_done_callback(lambda _: _batches_in_flight.pop(key, None))
    return await asyncio.shield(future)


LAYER_UNAVAILABLE = "layer.unavailable"


class RoleCheckedConsumer(AsyncWebsocketConsumer):
    """Accepts only users holding `role`; subclasses implement `start()` (join groups, send the first state).

    Groups are joined through `join`, which remembers them: they are left on disconnect and re-joined every third
    of the layer's group expiry while the connection lives. A channel layer that fails (Redis down) closes the
    connection with 4013 instead of crashing it (an HTTP 500 at the handshake)."""

    role = OPERATOR
    serving = False  # accepted after the role check; a refused connection's handlers do nothing

    async def __call__(self, scope, receive, send):
        self.joined: list[str] = []
        self.layer_down = False
        self.connected = False
        self.refresher: asyncio.Task | None = None
        self.rechecker: asyncio.Task | None = None
        self.serving = False
        self.user_id: int | None = None
        await super().__call__(scope, receive, send)

    # channels' AsyncConsumer assigns its layer receive to `channel_receive` and polls it; this property keeps that
    # and hands out `_receive_from_layer` instead.
    @property
    def channel_receive(self):
        return self._receive_from_layer

    @channel_receive.setter
    def channel_receive(self, value) -> None:
        self._layer_receive = value

    async def _receive_from_layer(self):
        """The layer's receive, turning a failure into one `layer.unavailable` message (then waiting forever:
        the connection is closing).

        The receive runs as a task of its own so that ending the consumer can cancel it until it ends: channels-redis
        on redis-py sometimes loses a cancellation (redis-py turns it into a connection error and retries the
        blocking read), and the receive then polls a dead channel for ever, which also keeps a closing event loop
        (a server's shutdown, a test's teardown) waiting."""
        receiving = asyncio.ensure_future(self._layer_receive())
        try:
            return await asyncio.shield(receiving)
        except asyncio.CancelledError:
            await cancel_until_done(receiving)
            raise
        except Exception as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from exc
            if self.layer_down:
                await asyncio.Future()  # until websocket.disconnect ends the consumer
            logger.warning("channel layer unavailable (%s); closing with %s", type(exc).__name__, CLOSE_TRY_AGAIN)
            return {"type": LAYER_UNAVAILABLE}

    async def websocket_connect(self, message) -> None:
        if self.layer_down:
            return  # already closed with CLOSE_TRY_AGAIN
        try:
            await super().websocket_connect(message)
        except Exception as exc:
            # A handshake that failed keeps no membership: nothing re-joins its groups for the life of the process.
            if _is_layer_error(exc):
                self._stop_refreshing()
                logger.warning("channel layer unavailable at connect (%s); closing with %s", type(exc).__name__,
                               CLOSE_TRY_AGAIN)
                self.layer_down = True
                await self.refuse(CLOSE_TRY_AGAIN)
                return
            await self.leave_all()
            if not db_outage.is_unavailable(exc):
                raise
            # The database does not answer (a restart, a full disk): "try again later", not an HTTP 500.
            logger.warning("database unavailable at connect (%s); closing with %s", type(exc).__name__,
                           CLOSE_TRY_AGAIN)
            await self.refuse(CLOSE_TRY_AGAIN)

    async def layer_unavailable(self, message) -> None:
        if not self.layer_down:
            self.layer_down = True
            await self.refuse(CLOSE_TRY_AGAIN)

    async def connect(self) -> None:
        if not ws_auth.has_session_cookie(self.scope):
            await self.refuse(CLOSE_ANONYMOUS)
            return
        # Join before the read: an event published in between is either covered by what the read sees or arrives
        # later with a higher seq; none falls in a gap. Nothing is sent before the role check below, and a refused
        # connection leaves the groups at once (`serving` keeps its handlers quiet meanwhile).
        await self.subscribe()
        refused, first = await in_connect_pool(self._admit_and_read)()
        if refused is None and first is None:
            refused = CLOSE_NOT_FOUND
        if refused is not None:
            await self.leave_all()
            await self.refuse(refused)
            return
        self.serving = True
        await self.start(first)
        # Access can be taken away while the page is open (compactweb.ws_revocation): listen for the user's
        # changes (joined after the first message, so a connect still waits on one layer call only), and re-check
        # now and then for changes made behind the ORM's back.
        await self.join(ws_revocation.user_group(self.user_id))
        self.rechecker = asyncio.ensure_future(self._recheck_now_and_then())

    def _admit_and_read(self) -> tuple[int | None, Any]:
        """On the connect pool: the user, the role check and the first read, in one hop. Returns (close code or
        None, what `start` needs or None when the page's object does not exist)."""
        user = ws_auth.resolve_user(self.scope)
        if not user.is_authenticated:
            return CLOSE_ANONYMOUS, None
        if not has_role(user, self.role):
            return CLOSE_FORBIDDEN, None
        self.user_id = user.pk
        return None, self.read_first()

    def _refusal_now(self) -> int | None:
        """On the connect pool: the close code the connection would get if it connected now, or None."""
        user = ws_auth.reload_user(self.scope)
        if not user.is_authenticated or user.pk != self.user_id:
            return CLOSE_ANONYMOUS
        if not has_role(user, self.role):
            return CLOSE_FORBIDDEN
        return None

    async def auth_changed(self, message) -> None:
        """The user's password, activity, groups or login changed (compactweb.ws_revocation): check again."""
        await self.recheck()

    async def recheck(self) -> None:
        if not self.serving:
            return
        refused = await in_connect_pool(self._refusal_now)()
        if refused is not None and self.serving:
            self.serving = False
            logger.info("closing a websocket of user %s with %s: its access changed", self.user_id, refused)
            await self.leave_all()
            await self.close(code=refused)

    async def _recheck_now_and_then(self) -> None:
        interval = float(settings.COMPACTWEB_WS_AUTH_RECHECK_SECONDS)
        while self.serving:
            await asyncio.sleep(interval)
            try:
                await self.recheck()
            except Exception:  # the database is away: the next round (or the disconnect) settles it
                logger.warning("could not re-check the user of a websocket", exc_info=True)

    async def subscribe(self) -> None:
        """Before the first read: join the page's groups."""
        for group in self.groups_to_join():
            await self.join(group)

    def groups_to_join(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def read_first(self) -> Any:  # pragma: no cover - abstract
        """Synchronous, on the connect pool: what `start` sends first; None when the object does not exist."""
        raise NotImplementedError

    async def accept(self, subprotocol=None, headers=None) -> None:
        if not self.connected:
            self.connected = True
            await super().accept(subprotocol, headers)

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined.append(group)
        if self.refresher is None:
            self.refresher = asyncio.ensure_future(self._keep_membership())

    async def _keep_membership(self) -> None:
        interval = float(getattr(self.channel_layer, "group_expiry", 86400)) / 3
        while True:
            await asyncio.sleep(interval)
            for group in list(self.joined):
                try:
                    await self.channel_layer.group_add(group, self.channel_name)
                except Exception:  # the layer's receive fails too and closes the connection (4013)
                    logger.warning("could not refresh the membership of %s in %s", self.channel_name, group)

    def _stop_refreshing(self) -> None:
        if self.refresher is not None:
            self.refresher.cancel()
            self.refresher = None

    async def leave_all(self) -> None:
        self._stop_refreshing()
        if self.rechecker is not None and self.rechecker is not asyncio.current_task():
            self.rechecker.cancel()
        groups, self.joined = self.joined, []
        for group in groups:
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # Redis down: the membership expires by itself (group expiry)
                logger.info("could not leave %s; the membership expires by itself", group)

    async def disconnect(self, code: int) -> None:
        await self.leave_all()

    async def start(self, first: Any) -> None:  # pragma: no cover - abstract
        """Accept and send the first state (`read_first`'s result)."""
        raise NotImplementedError

    async def receive(self, text_data=None, bytes_data=None) -> None:
        """The pages only listen; anything a client sends is ignored."""


class SessionConsumer(RoleCheckedConsumer):
    """Streams one session: every rollout line after the page's seq, batched, plus transient compaction progress."""

    def groups_to_join(self) -> list[str]:
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        # and the fleet's alerts: the page's alerts card lists the fleet's storms beside the session's own alerts
        return [session_group(self.session_id), FLEET_ALERTS_GROUP]

    def read_first(self) -> tuple[str, int, str] | None:
        return live_render.hello(session_id=self.session_id)

    async def start(self, first: tuple[str, int, str]) -> None:
        html, self.last_sent, self.thread_id = first
        await self.accept()
        await self.send(text_data=html)

    async def session_event(self, event: dict[str, Any]) -> None:
        if not self.serving:
            return
        if event.get("seq") is None:
            if event.get("kind") in TURN_PROGRESS_KINDS:
                return
            if event.get("kind") == ALERT_KIND:
                await self.send(text_data=await in_render_pool(live_render.alerts_update)(session_id=self.session_id))
                return
            html = await in_render_pool(live_render.session_transient)(session_id=self.session_id, event=event)
            await self.send(text_data=html)
            return
        if event["seq"] <= self.last_sent:
            return  # already sent: one batch covers every line committed before it was read
        summary = event.get("summary") or {}
        upto = int(summary.get("last_seq") or event["seq"])
        # Every page watching this session asks for the same batch: the first renders it, the others find it here
        # without a trip to the database thread.
        html = live_render.batch_cache.get(
            live_render.batch_key(thread_id=self.thread_id, after_seq=self.last_sent, upto_seq=upto)
        )
        if html is None:
            html, upto = await shared_batch(session_id=self.session_id, thread_id=self.thread_id,
                                            after_seq=self.last_sent)
        if html:
            self.last_sent = upto
            await self.send(text_data=html)


# The fleet's counts by filter, shared by the fleet pages of a process: (monotonic time read, counts). Every page of
# a filter needs the same counts after the same events, so they are read once per COUNTS_SECONDS, not per page;
# bounded, as every text typed in the filter is a filter of its own.
_fleet_counts: Lru[FleetFilter, tuple[float, dict[str, Any]]] = Lru(64)
COUNTS_SECONDS = 1.0


def shared_fleet_counts(fleet_filter: FleetFilter, *, now: float) -> dict[str, Any]:
    cached = _fleet_counts.get(fleet_filter)
    if cached is None or now - cached[0] >= COUNTS_SECONDS:
        cached = (now, live_selectors.fleet_counts(fleet_filter=fleet_filter))
        _fleet_counts.put(fleet_filter, cached)
    return cached[1]


class FleetConsumer(RoleCheckedConsumer):
    """Streams one page of the fleet board: the rows it holds (the `rows` of its query, else its page ranked at
    connect), coalescing updates per session: each row is re-rendered at most once per `flush_seconds` from its
    session's newest summary. A row is a snapshot carrying its session's seq, so coalescing loses nothing: the newest
    row contains every change before it. A quiet board renders an event's row at once; the events that follow within
    `flush_seconds` of that render wait for the next one.

    A board joins no fleet group of its own: the process's fleet hub (sessions_app.live.fleet_hub) receives each event
    once and hands it only to the boards holding its row (and to a board with room at the end of the fleet, which a
    new session joins). A change of state anywhere (or a new session) refreshes the header's counts, at most once per
    COUNTS_SECONDS; an alert re-renders the alerts card."""

    flush_seconds = 0.1

    async def __call__(self, scope, receive, send):
        self.hub: FleetHub | None = None
        self.holds_hub = False
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._drop_from_hub()  # a consumer ended without its disconnect (a server's shutdown) leaves no board

    async def subscribe(self) -> None:
        self.hub = hub_for(self.channel_layer)
        await self.hub.hold()
        self.holds_hub = True

    async def leave_all(self) -> None:
        await super().leave_all()
        if self.hub is not None:
            self.hub.unregister(self)
            if self.holds_hub:
                self.holds_hub = False
                await self.hub.release()

    def _drop_from_hub(self) -> None:
        if self.hub is None:
            return
        self.hub.unregister(self)
        if self.holds_hub:
            self.holds_hub = False
            asyncio.ensure_future(self.hub.release())

    def _query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(self.scope.get("query_string", b"").decode()).items()}

    def read_first(self) -> dict:
        query = self._query()
        page = FleetPage.from_query(query)
        rows = page.rows
        if rows is None:
            rows = tuple(s.pk for s in live_selectors.fleet_page(fleet_filter=FleetFilter.from_query(query), page=page))
        newest = Session.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        return {"names": live_render.names(), "rows": rows, "newest": newest}

    async def start(self, first: dict) -> None:
        self.fleet_filter = FleetFilter.from_query(self._query())
        self.page_rows: set[int] = set(first["rows"])
        # A page with room is the fleet's last: a session created after the connect ranks there (its fill starts
        # near 0, its id is the newest), so it joins the page while there is room.
        self.newest_id: int | None = first["newest"] if len(self.page_rows) < PAGE_SIZE else None
        self.summaries: dict[int, dict[str, Any]] = {}
        self.attempts: dict[int, dict[str, Any] | None] = {}
        self.pending: set[int] = set()
        self.stale_attempts: set[int] = set()
        self.left_rows: set[int] = set()  # rows a render found out of the filter: no longer followed
        self.counts_due = False
        self.counts_at = 0.0
        self.counts_sent: dict[str, Any] | None = None
        self.flushed_at = 0.0
        self.flusher: asyncio.Task | None = None
        self.rows_waiting = asyncio.Event()
        self.names = first["names"]
        await self.accept()
        self.hub.register(self, open_ended=self.newest_id is not None)

    async def disconnect(self, code: int) -> None:
        flusher = getattr(self, "flusher", None)
        if flusher is not None:
            flusher.cancel()
        await self.leave_all()

    # --- what the hub hands over (on the event loop; quick: rendering waits for the flush) --------------------------

    def joins_the_page(self, session_id: int, summary: dict[str, Any] | None) -> bool:
        return (self.serving and self.newest_id is not None and session_id > self.newest_id
                and len(self.page_rows) < PAGE_SIZE and summary is not None and self.fleet_filter.matches(summary))

    def row_event(self, session_id: int, event: dict[str, Any], summary: dict[str, Any] | None) -> None:
        """An event of a row this page holds."""
        if not self.serving:
            return
        if summary is not None:
            previous = self.summaries.get(session_id)
            if previous is None or summary.get("last_seq", 0) >= previous.get("last_seq", 0):
                self.summaries[session_id] = summary
        lines = (event.get("detail") or {}).get("lines") or []
        if event.get("seq") is None or any(
            # the fleet row's "last compaction" cell is read again after these
            line.get("line_kind") in projection.COMPACTION_STATE_KINDS
            or line.get("event_type") in projection.COMPACTION_EVENT_TYPES
            for line in lines
        ):
            self.stale_attempts.add(session_id)
        self.pending.add(session_id)
        self._flush_later()

    def counts_changed(self) -> None:
        if self.serving:
            self.counts_due = True
            self._flush_later()

    def alerts_changed(self) -> None:
        if self.serving:
            asyncio.ensure_future(self._send_alerts())

    def layer_failed(self) -> None:
        asyncio.ensure_future(self.layer_unavailable({"type": LAYER_UNAVAILABLE}))

    async def _send_alerts(self) -> None:
        try:
            html = await in_render_pool(live_render.alerts_update)()
            if self.serving:
                await self.send(text_data=html)
        except Exception:  # the page re-syncs on its next reconnect; keep the connection serving
            logger.exception("fleet alerts update failed")

    # --- rendering ------------------------------------------------------------------------------------------------

    def _flush_later(self) -> None:
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.ensure_future(self._flush_soon())
        elif self.pending:
            self.rows_waiting.set()  # a flusher waiting for the counts alone: rows do not wait that long

    async def _flush_soon(self) -> None:
        while self.pending or self.counts_due:
            # Rows: at most one render per flush_seconds, the first at once (once the events that arrived in this
            # turn of the loop are in). Counts alone: when they are due, unless a row comes first.
            now = time.monotonic()
            rows_due = self.flushed_at + self.flush_seconds
            if self.pending:
                await asyncio.sleep(max(0.0, rows_due - now))
            else:
                self.rows_waiting.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.rows_waiting.wait(),
                                           max(0.0, rows_due - now, self.counts_at + COUNTS_SECONDS - now))
                if self.pending:
                    continue
            try:
                await self.flush()
            except Exception:  # the page re-syncs on its next reconnect; keep the connection serving
                logger.exception("fleet update failed")

    async def flush(self) -> None:
        now = time.monotonic()
        counts = self.counts_due and now - self.counts_at >= COUNTS_SECONDS
        if not self.pending and not counts:
            return  # only counts, not due yet: no thread hop
        self.flushed_at = now
        if counts:
            self.counts_due, self.counts_at = False, now
        ids, self.pending = sorted(self.pending), set()
        stale, self.stale_attempts = self.stale_attempts, set()
        html = await in_render_pool(self._render)(ids, stale, counts)
        if self.left_rows:
            left, self.left_rows = self.left_rows, set()
            if self.hub is not None:
                self.hub.remove_rows(self, left)
            self.page_rows -= left
        if html:
            await self.send(text_data=html)

    def _render(self, ids: list[int], stale: set[int], counts: bool = False) -> str:
        html = self._render_rows(ids, stale) if ids else ""
        if counts:
            fresh = shared_fleet_counts(self.fleet_filter, now=time.monotonic())
            if fresh != self.counts_sent:
                self.counts_sent = fresh
                html += live_render.fleet_counts_of(counts=fresh, fleet_filter=self.fleet_filter)
        return html

    def _render_rows(self, ids: list[int], stale: set[int]) -> str:
        # A compaction changes the row's numbers and its last-compaction cell together: re-read both, so the row
        # never shows a finished compaction beside the counts from before it.
        missing = [i for i in ids if i not in self.summaries or i in stale]
        if missing:  # an empty `pk__in` still compiles its query: most of an update that reads nothing
            for session in Session.objects.select_related("provider", "policy").filter(pk__in=missing):
                self.summaries[session.pk] = selectors.session_summary(session=session)
        reread = [i for i in ids if i in stale or i not in self.attempts]
        if reread:
            fresh = live_selectors.last_attempts(session_ids=reread)
            self.attempts.update({i: fresh.get(i) for i in reread})
        summaries = [self.summaries[i] for i in ids if i in self.summaries]
        if any(s["provider"] not in self.names["providers"] or s["policy"] not in self.names["policies"]
               for s in summaries):
            self.names = live_render.names()
        # a row that leaves the filter is removed from the page, and no longer followed (the flush tells the hub,
        # on the event loop)
        self.left_rows |= {s["id"] for s in summaries if not self.fleet_filter.matches(s)}
        return live_render.fleet_updates(
            summaries=summaries, attempts=self.attempts, names_by_id=self.names, fleet_filter=self.fleet_filter
        )


def _is_layer_error(exc: BaseException) -> bool:
    """A failure of the channel layer's connection (Redis down or unreachable), not a bug."""
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover - redis is a dependency
        return isinstance(exc, OSError)
    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError | TimeoutError)
