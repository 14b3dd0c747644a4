"""Issue 29: the recorder writes what passed, off the stream's path: the proxy hands it the raw answer; a batch of
records is one transaction, and a record that fails rolls back alone."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application

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
