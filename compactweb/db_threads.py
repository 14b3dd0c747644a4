"""Threads that keep their database connection from one piece of work to the next (issue 43: written once).

A connection belongs to the thread that opened it, and with CONN_MAX_AGE 0 Django would close it after every
request; a thread of ours that opened one per read or write paid more for the connection than for the work (on
SQLite the settings' PRAGMAs, the schema parsed again and a cold page cache; on PostgreSQL a new backend). So a
connection opened on a thread that joined here (`keep_connections_here`, a thread's or an executor's initializer) is
kept for REQUEST_CONN_MAX_AGE seconds and health-checked before it is reused; `fresh_connections` (before each piece
of work) closes it when it outlived that age or an error left it unusable, as Django's end-of-request check does.

Used by the request threads (compactweb.request_threads) and by the gateway's own threads: its lookups, its rate
counts, its journal of exchanges begun and its recorder (docs/architecture.md, "The gateway's threads").
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections, connections
from django.db.backends.signals import connection_created

REQUEST_CONN_MAX_AGE = 60.0

_kept = threading.local()  # .member is True on a thread that keeps its connections


def keep_connections_here() -> None:
    """This thread keeps the connections it opens (module docstring)."""
    _kept.member = True


def _keep(sender, connection, **kwargs) -> None:
    """A connection opened on a keeping thread lives REQUEST_CONN_MAX_AGE seconds and is health-checked when it is
    reused (Django read both from the settings a moment ago: CONN_MAX_AGE 0, no checks)."""
    if getattr(_kept, "member", False):
        connection.close_at = time.monotonic() + REQUEST_CONN_MAX_AGE
        connection.health_check_enabled = True


connection_created.connect(_keep, dispatch_uid="compactweb.db_threads")


def fresh_connections() -> None:
    """Before a piece of work: close this thread's connections that outlived their age or that an error left
    unusable (the work then opens a new one)."""
    close_old_connections()


def close_this_threads_connections() -> None:
    """Close this thread's connections, except one inside a transaction."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


def _call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    fresh_connections()
    return fn(**kwargs)


class DatabaseThread:
    """One thread of its own for short database work (`run` from an event loop, `submit` from anywhere), in the
    order it was handed over, keeping its connection between pieces of work."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=keep_connections_here)

    def submit(self, fn: Callable[..., Any], /, **kwargs: Any) -> Future:
        return self._executor.submit(_call, fn, kwargs)

    async def run(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(_call, fn, kwargs))

    def close_connections(self) -> None:
        """Close the thread's connections now, waiting for it (a test database is dropped after the tests)."""
        self._executor.submit(connections.close_all).result()
