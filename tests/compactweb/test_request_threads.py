"""HTTP requests on reused threads (compactweb.request_threads): a pool thread keeps its database connection from
one request to the next, under Django's own end-of-request checks, and closes it once idle; a request that finds
every thread busy is served on a thread of its own, as Django serves every request."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from compactweb import db_threads
from compactweb.request_threads import PooledASGIHandler, RequestThreads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest.fixture
def opened():
    """The names of the threads that opened a database connection, in order."""
    names: list[str] = []

    def record(sender, connection, **kwargs):
        names.append(threading.current_thread().name)

    connection_created.connect(record)
    yield names
    connection_created.disconnect(record)


def _client(threads: RequestThreads) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=PooledASGIHandler(threads=threads))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


def _is_open() -> bool:
    return connection.connection is not None


async def test_requests_on_a_pool_thread_share_one_database_connection(opened):
    threads = RequestThreads(threads=1, idle_seconds=60)
    async with _client(threads) as client:
        for _ in range(3):
            assert (await client.get("/healthz")).status_code == 200
    assert len(opened) == 1 and opened[0].startswith("request-0")
    threads.close_connections()


async def test_an_idle_pool_thread_closes_its_connection(opened):
    threads = RequestThreads(threads=1, idle_seconds=0.2)
    async with _client(threads) as client:
        assert (await client.get("/healthz")).status_code == 200
        worker = threads.borrow()
        assert await asyncio.wrap_future(worker.executor.submit(_is_open))
        threads.give_back(worker)
        # Each look waits longer than the idle time (a look keeps the thread busy); a loaded host closes later.
        for _ in range(100):
            await asyncio.sleep(0.6)
            worker = threads.borrow()
            still_open = await asyncio.wrap_future(worker.executor.submit(_is_open))
            threads.give_back(worker)
            if not still_open:
                break
        assert not still_open
        assert (await client.get("/healthz")).status_code == 200  # and the next request opens a new one
    assert len(opened) == 2
    threads.close_connections()


async def test_a_pool_connection_older_than_its_age_is_closed_at_the_end_of_its_request(opened, monkeypatch):
    monkeypatch.setattr(db_threads, "REQUEST_CONN_MAX_AGE", 0.0)
    threads = RequestThreads(threads=1, idle_seconds=60)
    async with _client(threads) as client:
        for _ in range(2):
            assert (await client.get("/healthz")).status_code == 200
    assert len(opened) == 2  # Django's own close_old_connections still decides at every request's end


async def test_a_request_finding_every_thread_busy_is_served_on_a_thread_of_its_own(opened):
    threads = RequestThreads(threads=1, idle_seconds=60)
    busy = threads.borrow()
    async with _client(threads) as client:
        for _ in range(2):
            assert (await client.get("/healthz")).status_code == 200
    assert len(opened) == 2 and not any(name.startswith("request-") for name in opened)  # closed after each
    threads.give_back(busy)
    assert threads.borrow() is busy  # and the pool still lends its own thread
