"""The gateway's short database reads off the event loop (a key's route, a pause, a compaction handle): one thread
of their own, so they never queue behind the recorder, and so its connection can be closed on demand (a test
database is dropped after the tests). Each read is a single indexed query, and keys and pauses are cached.

The thread keeps its connection from one read to the next, as the request threads do (compactweb.request_threads):
with CONN_MAX_AGE 0 every read opened a new one (on SQLite the settings' PRAGMAs, the schema parsed again and a
cold page cache; on PostgreSQL a new backend), which cost more than the read. It is health-checked before reuse and
closed when it outlived REQUEST_CONN_MAX_AGE or an error left it unusable (`close_old_connections`)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections, connections
from django.db.backends.signals import connection_created

from compactweb.request_threads import REQUEST_CONN_MAX_AGE

_mine = threading.local()  # .member is True on the lookup thread


def _join() -> None:
    _mine.member = True


_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compactweb-gateway-lookup", initializer=_join)


def _keep_connection(sender, connection, **kwargs) -> None:
    if getattr(_mine, "member", False):
        connection.close_at = time.monotonic() + REQUEST_CONN_MAX_AGE
        connection.health_check_enabled = True


connection_created.connect(_keep_connection, dispatch_uid="gateway_app.lookups")


def _call(fn, kwargs):
    close_old_connections()
    return fn(**kwargs)


async def run(fn, /, **kwargs):
    return await asyncio.get_running_loop().run_in_executor(_thread, functools.partial(_call, fn, kwargs))


def close_connections() -> None:
    _thread.submit(connections.close_all).result()
