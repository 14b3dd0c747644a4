"""The live consumers' database threads: small pools whose connections stay open while work is waiting.

`database_sync_to_async` opens and closes a database connection around every call (CONN_MAX_AGE is 0: Django's
persistent connections do not suit ASGI's per-request threads). On PostgreSQL a fresh connection is not only the
connect (~10 ms) but a new server backend whose catalog caches start cold: a connect's first reads took ~70 ms
on one against ~10 ms on a warm one (docs/benchmarks.md, "Websocket connect bursts"), and a burst of 50 connects
paid that 50 times. A pool here keeps each thread's connection from one call to the next while other calls are
waiting or running, and closes it like `database_sync_to_async` when the pool falls idle, so an idle web process
holds no connection (and a test database can be dropped), and at most `threads` connections per pool are open.
A connection an error left unusable is closed at once; the next call opens a new one.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections


class DatabaseThreads:
    def __init__(self, *, threads: int, name: str) -> None:
        self.threads = threads
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._in_flight = 0  # calls submitted and not yet returned (waiting or running)

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
            with self._lock:
                others_waiting = self._in_flight > 1  # this call is still counted
            if not others_waiting:
                close_old_connections()  # idle: as database_sync_to_async would (CONN_MAX_AGE 0 closes it)
            else:
                for conn in connections.all(initialized_only=True):
                    if conn.connection is not None and conn.errors_occurred and not conn.is_usable():
                        conn.close()
