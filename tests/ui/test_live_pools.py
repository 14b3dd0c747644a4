"""The live pools' database connections (sessions_app.live.pools): kept from one call to the next while calls
keep coming, closed by every thread once the pool has been idle for a moment, and closed at once on request."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.db import connection

from sessions_app.live.pools import DatabaseThreads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def _connection_id() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return id(connection.connection)


def _is_open() -> bool:
    return connection.connection is not None


async def test_a_pool_keeps_its_connection_between_calls_and_closes_it_once_idle():
    pool = DatabaseThreads(threads=1, name="test-pool", idle_seconds=0.3)
    first = await pool.run(_connection_id)()
    second = await pool.run(_connection_id)()
    assert first == second  # the second call found the connection still open
    assert await pool.run(_is_open)()
    # Idle long enough, it is closed (a check itself opens nothing). Each look waits longer than the idle time, so
    # the looks do not keep the thread busy; a loaded host only makes the closing later, never wrong.
    for _ in range(100):
        await asyncio.sleep(0.8)
        if not await pool.run(_is_open)():
            break
    assert not await pool.run(_is_open)()


async def test_close_connections_closes_every_threads_connection_now():
    pool = DatabaseThreads(threads=3, name="test-pool", idle_seconds=60)
    started = time.monotonic()
    await asyncio.gather(*(pool.run(lambda: (_connection_id(), time.sleep(0.05)))() for _ in range(3)))
    await asyncio.to_thread(pool.close_connections)
    assert time.monotonic() - started < 30  # now, not after the 60 s idle time
    assert not any(await asyncio.gather(*(pool.run(lambda: (time.sleep(0.05), _is_open())[1])() for _ in range(3))))


async def test_with_no_idle_time_a_pool_closes_as_soon_as_it_falls_idle():
    pool = DatabaseThreads(threads=1, name="test-pool", idle_seconds=0)
    await pool.run(_connection_id)()
    assert not await pool.run(_is_open)()
