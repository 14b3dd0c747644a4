"""Issue 29: the recorder writes what passed, off the stream's path: the proxy hands it the raw answer; a batch of
records is one transaction, and a record that fails rolls back alone."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application
from django.db import connections

from compactweb.routing import http_router
from gateway_app import proxy, recorder, recording
from gateway_app.models import GatewaySession
from sessions_app.models import Session
from tests.gateway_app.test_proxy import BASE, bearer, meta, user

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_record_that_fails_does_not_take_the_others_of_its_batch_with_it(sim_upstream, gateway_key, monkeypatch):
    real = recording.do_record_exchange
    threads = [f"0190cccc-0000-7000-8000-00000000000{n}" for n in (1, 2, 3)]

    def second_fails(*, exchange):
        if exchange.group == f"thread:{threads[1]}":
            raise RuntimeError("this record cannot be written")
        return real(exchange=exchange)

    monkeypatch.setattr(recording, "do_record_exchange", second_fails)
    gate = threading.Event()
    app = http_router(get_asgi_application())

    async def go():
        blocked = asyncio.ensure_future(recorder.recorder.run(lambda: gate.wait(30)))  # the recorder is busy
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            for thread in threads:
                response = await client.post("/gateway/v1/responses", json={
                    "model": "compactweb-sim", "stream": True, "input": [BASE, user(f"hello from {thread}")]},
                    headers={**bearer(gateway_key), **meta(thread)})
                assert response.status_code == 200
        gate.set()  # the three records now wait together: one batch
        await blocked
        await proxy.drain()

    async_to_sync(go)()
    recorded = set(GatewaySession.objects.values_list("group_key", flat=True))
    assert recorded == {f"thread:{threads[0]}", f"thread:{threads[2]}"}
    assert Session.objects.filter(source="gateway").count() == 2


def test_chunks_ready_together_go_to_the_client_in_one_send_and_a_lone_chunk_at_once():
    async def go():
        gate = asyncio.Event()
        got: list[bytes] = []

        async def upstream():
            yield b"event: a\n\n"
            await gate.wait()  # the first chunk must reach the client before the upstream sends more
            yield b"event: b\n\n"
            yield b"event: c\n\n"
            raise OSError("the upstream went away")

        with pytest.raises(OSError):
            async for piece in proxy._coalesced(upstream()):
                got.append(piece)
                gate.set()
        return got

    got = async_to_sync(go)()
    assert got[0] == b"event: a\n\n"
    assert b"".join(got) == b"event: a\n\nevent: b\n\nevent: c\n\n"
    assert len(got) == 2  # b and c were ready together: one send


def _failed(route, n: int) -> recording.Exchange:
    """A refused request's exchange: recorded as a GatewayAttempt of the route."""
    return recording.Exchange(route_id=route.pk, key_id=None, client_name="c", group="", endpoint="responses",
                              kind="turn", meta={}, base_instructions="", history=[], model="m", status=400,
                              error=f"refused {n}")


def test_a_full_queue_makes_the_next_record_wait_for_room_and_loses_none(route, monkeypatch):
    """Issue 41: the queue is bounded: with the recorder stuck and the queue full, the next record waits for room
    (the request that hands it over waits, memory does not grow), then every record is written."""
    from gateway_app.models import GatewayAttempt

    small = recorder.Recorder(limit=2)
    gate, started = threading.Event(), threading.Event()

    async def go():
        stuck = asyncio.ensure_future(small.run(lambda: (started.set(), gate.wait(60))))
        assert await asyncio.to_thread(started.wait, 30)  # the thread is stuck on that job
        await small.put(_failed(route, 1))
        await small.put(_failed(route, 2))
        third = asyncio.ensure_future(small.put(_failed(route, 3)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not third.done() and small._queue.qsize() == 2  # waiting for room; the queue stays bounded
        gate.set()
        await third
        await stuck
        await small.run(lambda: None)

    async_to_sync(go)()
    small.run_sync(connections.close_all)
    assert sorted(GatewayAttempt.objects.values_list("error", flat=True)) == ["refused 1", "refused 2", "refused 3"]


def test_a_recorder_thread_that_died_is_started_again(route):
    from gateway_app.models import GatewayAttempt

    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    fresh = recorder.Recorder()
    fresh._thread = dead  # as if it had died
    fresh.submit(_failed(route, 1))
    assert fresh.drain(timeout=60)
    assert fresh._thread is not dead and fresh._thread.is_alive()
    fresh.run_sync(connections.close_all)
    assert GatewayAttempt.objects.get().error == "refused 1"  # written by the new thread


def test_at_exit_the_queued_records_are_written(route, monkeypatch):
    """`drain` is registered with atexit when the module loads; what is queued at exit is written, not dropped."""
    import atexit
    import importlib

    from gateway_app.models import GatewayAttempt

    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    module = importlib.reload(recorder)  # the module registers its recorder's drain at import
    try:
        assert registered == [module.recorder.drain]
        gate = threading.Event()
        module.recorder.later(lambda: gate.wait(60))
        for n in range(3):
            module.recorder.submit(_failed(route, n))
        gate.set()
        assert registered[0](timeout=60)  # what atexit will call
        assert GatewayAttempt.objects.count() == 3
    finally:
        module.close_connections()
