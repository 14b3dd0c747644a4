"""Per-route requests per minute, counted across every dashboard process (issue 29).

A fixed one-minute window per route.

- With Redis (REDIS_URL): one INCR and EXPIRE per request, awaited on the event loop (no thread): exact.
- Without (the embedded default, or a deployment on the database alone): the request never waits on the
  database, where a write can queue behind the recorder's (SQLite has one writer). Each process counts its own
  requests in memory and, at most every SYNC_SECONDS and off the request's path (a thread of its own), writes its
  count (a GatewayRateCount row per route, minute and process) and reads the others'. A request is allowed while
  this process's count plus the others' last read fits the limit: across processes the limit holds to within
  what they served in the last SYNC_SECONDS.

When Redis does not answer, requests pass (a limit is not worth refusing every client for) and it is logged.

Failed key lookups per client address (`failed_keys`): each costs a database read and is how a key would be
guessed, so after FAILED_KEYS_PER_MINUTE unknown keys in a minute an address's next keys are not looked up (429)
until the minute ends; a key this process knows already (its cache) still works. Counted per process, in memory
(the event loop's own: no lock, no database).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import Future

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Sum

from compactweb.db_threads import DatabaseThread
from gateway_app.models import GatewayRateCount

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
SYNC_SECONDS = 1.0
PROCESS = uuid.uuid4().hex  # this dashboard process's name in GatewayRateCount
REDIS_PREFIX = "compactweb:gateway:rpm"

_redis: dict[int, object] = {}
_sync_thread = DatabaseThread("compactweb-gateway-rate")  # keeps its connection from one sync to the next


def window_now() -> int:
    return int(time.time() // WINDOW_SECONDS)


def retry_after() -> int:
    """Seconds until the current window ends (the 429's Retry-After)."""
    return WINDOW_SECONDS - int(time.time()) % WINDOW_SECONDS


def do_sync_count(*, route_id: int, window: int, process: str, count: int) -> int:
    """Write `process`'s count of the route's requests in `window`; the other processes' counts, summed."""
    with transaction.atomic():
        if not GatewayRateCount.objects.filter(route_id=route_id, window=window, process=process).update(count=count):
            try:
                with transaction.atomic():
                    GatewayRateCount.objects.create(route_id=route_id, window=window, process=process, count=count)
            except IntegrityError:  # written since (a sync of this process from before it restarted its count)
                GatewayRateCount.objects.filter(route_id=route_id, window=window, process=process).update(count=count)
            GatewayRateCount.objects.filter(route_id=route_id, window__lt=window - 1).delete()
        others = (GatewayRateCount.objects.filter(route_id=route_id, window=window).exclude(process=process)
                  .aggregate(n=Sum("count"))["n"])
    return int(others or 0)


class _Counts:
    """This process's counts and the others' last read, per route, for the current window."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mine: dict[int, tuple[int, int]] = {}  # route -> (window, count)
        self._others: dict[int, tuple[int, int, float]] = {}  # route -> (window, count, read at)
        self._syncing: dict[int, Future] = {}

    def take(self, route_id: int, window: int) -> tuple[int, int]:
        with self._lock:
            start, count = self._mine.get(route_id, (window, 0))
            count = count + 1 if start == window else 1
            self._mine[route_id] = (window, count)
            w, others, read_at = self._others.get(route_id, (window, 0, 0.0))
            return count, others if w == window else 0

    def due(self, route_id: int) -> bool:
        with self._lock:
            _, _, read_at = self._others.get(route_id, (0, 0, 0.0))
            running = self._syncing.get(route_id)
            return time.monotonic() - read_at >= SYNC_SECONDS and (running is None or running.done())

    def sync(self, route_id: int) -> Future:
        def run() -> None:
            with self._lock:
                window, count = self._mine.get(route_id, (window_now(), 0))
            try:
                others = do_sync_count(route_id=route_id, window=window, process=PROCESS, count=count)
            except Exception:  # a database that does not answer: the next sync tries again
                logger.warning("gateway: the rate count of route %s could not be shared", route_id, exc_info=True)
                connections.close_all()
                return
            with self._lock:
                self._others[route_id] = (window, others, time.monotonic())

        with self._lock:
            future = self._syncing[route_id] = _sync_thread.submit(run)
        return future

    def pending(self) -> list[Future]:
        with self._lock:
            return list(self._syncing.values())


_counts = _Counts()


async def _take_in_redis(route_id: int, window: int) -> int:
    import redis.asyncio as aioredis

    loop_id = id(asyncio.get_running_loop())
    client = _redis.get(loop_id)
    if client is None:
        client = _redis[loop_id] = aioredis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    key = f"{REDIS_PREFIX}:{route_id}:{window}"
    async with client.pipeline(transaction=False) as pipe:
        pipe.incr(key)
        pipe.expire(key, 2 * WINDOW_SECONDS)
        count, _ = await pipe.execute()
    return int(count)


async def allow(*, route_id: int, per_minute: int) -> bool:
    """Whether one more request of the route fits in this minute's window (it is counted either way)."""
    if not per_minute:
        return True
    window = window_now()
    if settings.REDIS_URL:
        try:
            return await _take_in_redis(route_id, window) <= per_minute
        except Exception:  # Redis down: let the request through rather than refuse everyone
            logger.warning("gateway: the rate count of route %s could not be read from Redis", route_id,
                           exc_info=True)
            return True
    mine, others = _counts.take(route_id, window)
    if _counts.due(route_id):
        _counts.sync(route_id)  # not awaited: the request never waits on the database
    return mine + others <= per_minute


def wait_for_syncs() -> None:
    """Wait until every count sync started so far has run (tests)."""
    for future in _counts.pending():
        future.result(timeout=30)


def close_connections() -> None:
    _sync_thread.close_connections()


FAILED_KEYS_PER_MINUTE = 30


class FailedKeys:
    """Unknown keys per client address in the current minute (event loop only)."""

    def __init__(self, limit: int = FAILED_KEYS_PER_MINUTE) -> None:
        self.limit = limit
        self._counts: dict[str, tuple[int, int]] = {}

    def exceeded(self, address: str) -> bool:
        window, count = self._counts.get(address, (0, 0))
        return window == window_now() and count >= self.limit

    def note(self, address: str) -> None:
        now = window_now()
        window, count = self._counts.get(address, (now, 0))
        if len(self._counts) > 100_000:
            self._counts.clear()
        self._counts[address] = (now, (count if window == now else 0) + 1)


failed_keys = FailedKeys()
