"""HTTP requests run on a few reused threads that keep their database connection from one request to the next.

Django's ASGI handler runs each request's sync code (middleware, view) on a thread of its own: asgiref's
ThreadSensitiveContext starts a thread for the request and a second one to join it afterwards, and because a
database connection belongs to its thread, every request opens a new connection and closes it at the end
(CONN_MAX_AGE is 0: persistent connections leak under ASGI, one per dead thread). On SQLite a new connection runs
the settings' PRAGMAs, parses the schema again on its first statement and starts with a cold page cache (the 16 MB
cache the settings give it never survives a request); on PostgreSQL it is a new server backend. Under the live
events bench, opening connections and starting threads were about a tenth of the web process's thread time, and an
append request over Daphne went from 31 to 24 ms without them (docs/benchmarks.md, "Round five").

Here a request borrows one of `threads` single-thread executors and hands it to ThreadSensitiveContext, so all its
sync work still runs on one thread, as Django requires. A connection opened on such a thread is kept for
REQUEST_CONN_MAX_AGE seconds (compactweb.db_threads), with Django's own end-of-request checks: `close_old_connections` still closes it when
it outlived that age, when an error left it unusable, or when autocommit was left changed; and it is health-checked
before a request reuses it. When a thread has had no request for IDLE_CLOSE_SECONDS its connection is closed, so
an idle web process holds no connection and a test database can be dropped. A request that finds every thread
busy gets a thread of its own, exactly as Django gives it: the pool bounds nothing, it only saves work.
"""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import django
from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

from compactweb.db_threads import REQUEST_CONN_MAX_AGE, close_this_threads_connections, keep_connections_here

__all__ = ["REQUEST_CONN_MAX_AGE", "PooledASGIHandler", "RequestThreads", "get_asgi_application"]

REQUEST_THREADS = int(os.environ.get("COMPACTWEB_REQUEST_THREADS", "8"))
IDLE_CLOSE_SECONDS = 1.0


class RequestThreads:
    """`threads` single-thread executors lent to one request at a time; each closes its thread's database
    connections once it has been idle for `idle_seconds`."""

    def __init__(self, *, threads: int, idle_seconds: float = IDLE_CLOSE_SECONDS) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._free = [_Worker(f"request-{i}") for i in range(threads)]
        self._all = list(self._free)

    def borrow(self) -> _Worker | None:
        """A free worker, or None when every one is lent out."""
        with self._lock:
            return self._free.pop() if self._free else None

    def give_back(self, worker: _Worker) -> None:
        worker.uses += 1
        uses = worker.uses
        with self._lock:
            self._free.append(worker)
        if self.idle_seconds > 0:
            asyncio.get_running_loop().call_later(self.idle_seconds, self._close_if_idle, worker, uses)

    def _close_if_idle(self, worker: _Worker, uses_when_armed: int) -> None:
        with self._lock:
            if worker.uses != uses_when_armed or worker not in self._free:
                return  # used since, or lent out now: the next give_back arms a new check
            self._free.remove(worker)
        future = worker.executor.submit(close_this_threads_connections)
        future.add_done_callback(lambda _f: self._return_after_close(worker))

    def _return_after_close(self, worker: _Worker) -> None:
        with self._lock:
            self._free.append(worker)

    def close_connections(self) -> None:
        """Close every worker's database connections now, waiting for it (tests, shutdown)."""
        for worker in self._all:
            if worker.uses:
                worker.executor.submit(close_this_threads_connections).result()


class _Worker:
    def __init__(self, name: str) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=keep_connections_here)
        self.uses = 0  # requests served so far


class PooledASGIHandler(ASGIHandler):
    """Django's ASGI handler, with each request's sync work on a borrowed pool thread (module docstring)."""

    def __init__(self, *, threads: RequestThreads) -> None:
        super().__init__()
        self.threads = threads

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        worker = self.threads.borrow()
        if worker is None:
            async with ThreadSensitiveContext():  # every pool thread busy: a thread of its own, as Django does
                await self.handle(scope, receive, send)
            return
        try:
            async with ThreadSensitiveContext(executor=worker.executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give_back(worker)


request_threads = RequestThreads(threads=REQUEST_THREADS)


def get_asgi_application() -> PooledASGIHandler:
    """What django.core.asgi.get_asgi_application returns, on the request pool."""
    django.setup(set_prefix=False)
    return PooledASGIHandler(threads=request_threads)
