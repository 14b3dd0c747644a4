"""Websocket consumers of the live pages: one session (`ws/sessions/<id>/`) and the fleet (`ws/fleet/`).

Both authenticate from the session cookie (AuthMiddlewareStack in compactweb.asgi) and always accept and then
close a refused connection, so the browser sees why: 4401 for an anonymous user, 4403 for a user without the
operator role, 4404 for an unknown session. Rendering lives in sessions_app.live_render; the consumers only
decide what to render and when.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from compactweb.roles import OPERATOR, ascope_has_role
from sessions_app import live_render, live_selectors, selectors
from sessions_app.events import FLEET_GROUP, session_group
from sessions_app.fleet_filter import FleetFilter
from sessions_app.models import Session

logger = logging.getLogger(__name__)

CLOSE_ANONYMOUS = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# Line kinds (and event_msg types) after which the fleet row's "last compaction" cell is re-read.
COMPACTION_LINE_KINDS = frozenset({"compacted", "rollback", "redo", "window_opened"})
COMPACTION_EVENT_TYPES = frozenset({"error", "compaction_interrupted"})


_batches_in_flight: dict[tuple[str, int], asyncio.Future] = {}


async def shared_batch(*, session_id: int, thread_id: str, after_seq: int) -> tuple[str, int]:
    """live_render.session_batch, read once for all the pages of this process waiting for the same batch: the
    others await the first one's database trip instead of queueing their own on the database thread. The batch
    reaches the session's newest seq, so a page that fell behind catches up in one message."""
    key = (thread_id, after_seq)
    future = _batches_in_flight.get(key)
    if future is None:
        future = asyncio.ensure_future(
            database_sync_to_async(live_render.session_batch)(session_id=session_id, after_seq=after_seq)
        )
        _batches_in_flight[key] = future
        future.add_done_callback(lambda _: _batches_in_flight.pop(key, None))
    return await asyncio.shield(future)


class RoleCheckedConsumer(AsyncWebsocketConsumer):
    """Accepts only users holding `role`; subclasses implement `start()` (join groups, send the first state)."""

    role = OPERATOR

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_ANONYMOUS)
            return
        if not await ascope_has_role(self.scope, self.role):
            await self.refuse(CLOSE_FORBIDDEN)
            return
        await self.start()

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def start(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def receive(self, text_data=None, bytes_data=None) -> None:
        """The pages only listen; anything a client sends is ignored."""


class SessionConsumer(RoleCheckedConsumer):
    """Streams one session: every rollout line after the page's seq, batched, plus transient compaction progress."""

    async def start(self) -> None:
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        thread_id = await database_sync_to_async(
            Session.objects.filter(pk=self.session_id).values_list("thread_id", flat=True).first
        )()
        if thread_id is None:
            await self.refuse(CLOSE_NOT_FOUND)
            return
        self.thread_id = str(thread_id)
        self.group = session_group(self.session_id)
        # Join first, then read the newest seq: an event published in between is either covered by the hello
        # or arrives later with a higher seq; none falls in a gap.
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        html, self.last_sent = await database_sync_to_async(live_render.hello)(session_id=self.session_id)
        await self.send(text_data=html)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def session_event(self, event: dict[str, Any]) -> None:
        if event.get("seq") is None:
            html = await database_sync_to_async(live_render.session_transient)(session_id=self.session_id, event=event)
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


class FleetConsumer(RoleCheckedConsumer):
    """Streams the fleet board, coalescing updates per session: each session's row is re-rendered at most once per
    `flush_seconds` from its newest summary. A row is a snapshot carrying its session's seq, so coalescing loses
    nothing: the newest row contains every change before it."""

    flush_seconds = 0.1

    async def start(self) -> None:
        query = {k: v[-1] for k, v in parse_qs(self.scope.get("query_string", b"").decode()).items()}
        self.fleet_filter = FleetFilter.from_query(query)
        self.summaries: dict[int, dict[str, Any]] = {}
        self.attempts: dict[int, dict[str, Any] | None] = {}
        self.pending: set[int] = set()
        self.stale_attempts: set[int] = set()
        self.flusher: asyncio.Task | None = None
        self.names = await database_sync_to_async(live_render.names)()
        await self.channel_layer.group_add(FLEET_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        flusher = getattr(self, "flusher", None)
        if flusher is not None:
            flusher.cancel()
        if hasattr(self, "pending"):
            await self.channel_layer.group_discard(FLEET_GROUP, self.channel_name)

    async def session_event(self, event: dict[str, Any]) -> None:
        session_id = int(event["session_id"])
        summary = event.get("summary")
        if summary is not None:
            previous = self.summaries.get(session_id)
            if previous is None or summary.get("last_seq", 0) >= previous.get("last_seq", 0):
                self.summaries[session_id] = summary
        lines = (event.get("detail") or {}).get("lines") or []
        if event.get("seq") is None or any(
            line.get("line_kind") in COMPACTION_LINE_KINDS or line.get("event_type") in COMPACTION_EVENT_TYPES
            for line in lines
        ):
            self.stale_attempts.add(session_id)
        self.pending.add(session_id)
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.ensure_future(self._flush_soon())

    async def _flush_soon(self) -> None:
        while self.pending:
            await asyncio.sleep(self.flush_seconds)
            try:
                await self.flush()
            except Exception:  # the page re-syncs on its next reconnect; keep the connection serving
                logger.exception("fleet update failed")

    async def flush(self) -> None:
        ids, self.pending = sorted(self.pending), set()
        stale, self.stale_attempts = self.stale_attempts, set()
        html = await database_sync_to_async(self._render)(ids, stale)
        if html:
            await self.send(text_data=html)

    def _render(self, ids: list[int], stale: set[int]) -> str:
        # A compaction changes the row's numbers and its last-compaction cell together: re-read both, so the row
        # never shows a finished compaction beside the counts from before it.
        missing = [i for i in ids if i not in self.summaries or i in stale]
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
        return live_render.fleet_updates(
            summaries=summaries, attempts=self.attempts, names_by_id=self.names, fleet_filter=self.fleet_filter
        )
