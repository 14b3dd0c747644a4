"""The gateway's short database reads off the event loop (a key's route, a pause, a compaction handle): one thread
of their own, so they never queue behind the recorder, and so its connection can be closed on demand (a test
database is dropped after the tests). Each read is a single indexed query, and keys and pauses are cached.

The thread keeps its connection from one read to the next (compactweb.db_threads: with CONN_MAX_AGE 0 every read
opened a new one, which cost more than the read); it is health-checked before reuse and closed when it outlived
REQUEST_CONN_MAX_AGE or an error left it unusable."""

from __future__ import annotations

from compactweb.db_threads import DatabaseThread

_thread = DatabaseThread("compactweb-gateway-lookup")


async def run(fn, /, **kwargs):
    return await _thread.run(fn, **kwargs)


def close_connections() -> None:
    _thread.close_connections()
