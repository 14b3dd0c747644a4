"""The gateway's short database reads off the event loop (a key's route, a pause, a compaction handle): one thread
of their own, so they never queue behind the recorder, and so its connection can be closed on demand (a test
database is dropped after the tests). Each read is a single indexed query, and keys and pauses are cached."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections, connections

_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compactweb-gateway-lookup")


def _call(fn, kwargs):
    close_old_connections()
    return fn(**kwargs)


async def run(fn, /, **kwargs):
    return await asyncio.get_running_loop().run_in_executor(_thread, functools.partial(_call, fn, kwargs))


def close_connections() -> None:
    _thread.submit(connections.close_all).result()
