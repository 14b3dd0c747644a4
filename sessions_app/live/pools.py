"""The live consumers' database threads: small pools whose connections stay open while work is waiting.

`database_sync_to_async` opens and closes a database connection around every call (CONN_MAX_AGE is 0: Django's
persistent connections do not suit ASGI's per-request threads). On PostgreSQL a fresh connection is not only the
connect (~10 ms) but a new server backend whose catalog caches start cold: a connect's first reads took ~70 ms
on one against ~10 ms on a warm one (docs/benchmarks.md, "Websocket connect bursts"), and a burst of 50 connects
paid that 50 times. A pool here keeps each thread's connection from one call to the next while other calls are
waiting or running, and closes it like `database_sync_to_async` when the pool falls idle, so an idle web process
holds no connection (and a test database can be dropped), and at most `threads` connections per pool are open.
A connection an error left unusable is closed at once; the next call opens a new one.

"Idle" means idle for IDLE_CLOSE_SECONDS: closing the moment the last call returned made a web process that
renders a few events a second open a new connection for nearly every render (about a tenth of a web process's
time under the scale-out load, and a backend start on the server each time). Once the pool has been idle that
long, each of its threads closes its own connection (a connection belongs to its thread); `close_connections`
does the same at once (tests, shutdown).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections

IDLE_CLOSE_SECONDS = 1.0
CLOSE_WAIT_SECONDS = 0.5  # how long the threads wait for each other to close together (then each closes alone)


class DatabaseThreads:
    def __init__(self, *, threads: int, name: str, idle_seconds: float = IDLE_CLOSE_SECONDS) -> None:
        self.threads = threads
        self.idle_seconds = idle_seconds
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._in_flight = 0  # calls submitted and not yet returned (waiting or running)
        self._calls = 0  # calls started so far: the idle timer closes only when none started since it was armed
        self._timer: threading.Timer | None = None

    @property
    def executor(self) -> ThreadPoolExecutor:
        return self._executor

    def run(self, function: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        """`function` as a coroutine function run on this pool."""
        on_thread = sync_to_async(functools.partial(self._call, function), thread_sensitive=False,
                                  executor=self._executor)

        @functools.wraps(function)
        async def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._in_flight += 1
                self._calls += 1
            try:
                return await on_thread(*args, **kwargs)
            finally:
                with self._lock:
                    self._in_flight -= 1

        return call

    def _call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        finally:
            for conn in connections.all(initialized_only=True):
                if conn.connection is not None and conn.errors_occurred and not conn.is_usable():
                    conn.close()
            with self._lock:
                falls_idle = self._in_flight <= 1  # this call is still counted
            if falls_idle:
                if self.idle_seconds <= 0:
                    close_old_connections()  # as database_sync_to_async would (CONN_MAX_AGE 0 closes it)
                else:
                    self._arm_idle_close()

    def _arm_idle_close(self) -> None:
        with self._lock:
            if self._timer is not None:
                return  # the armed timer checks again when it fires
            self._timer = threading.Timer(self.idle_seconds, self._close_if_idle, args=(self._calls,))
            self._timer.daemon = True
            self._timer.start()

    def _close_if_idle(self, calls_when_armed: int) -> None:
        with self._lock:
            self._timer = None
            busy, moved = self._in_flight > 0, self._calls != calls_when_armed
        if busy:
            return  # the running call arms a new timer when the pool falls idle again
        if moved:
            self._arm_idle_close()  # used meanwhile: idle for a whole period from now
            return
        self.close_connections()

    def close_connections(self) -> None:
        """Close the database connection of every thread of the pool now (each thread closes its own)."""
        threads = len(getattr(self._executor, "_threads", ())) or 0
        if not threads:
            return
        together = threading.Barrier(threads, timeout=CLOSE_WAIT_SECONDS)

        def close_on_this_thread() -> None:
            try:
                together.wait()  # one task per thread: each waits until every thread holds one
            except threading.BrokenBarrierError:
                pass
            close_old_connections()

        for future in [self._executor.submit(close_on_this_thread) for _ in range(threads)]:
            future.result()
