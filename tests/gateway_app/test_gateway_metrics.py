"""Issue 45: the gateway's requests on /metrics, read as a scraper reads them after real requests through the
dashboard's HTTP router to the simulated upstream: by route, endpoint, mode and status, time to first byte and
total time, upstream errors, hang-ups, and the recorder's queue."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application

from compactweb import gateway_metrics
from compactweb.routing import http_router
from gateway_app import proxy, recorder, upstream
from tests.gateway_app.conftest import call, make_route
from tests.gateway_app.test_proxy import BASE, bearer, meta, user
from tests.metrics_reading import TOKEN, scrape

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _token(settings):
    settings.COMPACTWEB_METRICS_TOKEN = TOKEN


def turn(key: str, thread: str, *, stream: bool = True) -> httpx.Response:
    body = {"model": "compactweb-sim", "stream": stream, "input": [BASE, user("please fix parser bug 3")]}
    return call("POST", "/gateway/v1/responses", json=body, headers={**bearer(key), **meta(thread)})


class Grew:
    def __init__(self, client) -> None:
        self.client = client
        self.before = scrape(client)

    def __call__(self, name: str, **labels) -> float:
        return scrape(self.client).value(name, **labels) - self.before.value(name, **labels)


def test_a_streamed_request_is_counted_by_route_endpoint_mode_and_status_and_timed(client, sim_upstream, route,
                                                                                   gateway_key):
    grew = Grew(client)
    assert turn(gateway_key, "0190aaaa-0000-7000-8000-0000000000a1").status_code == 200
    assert turn(gateway_key, "0190aaaa-0000-7000-8000-0000000000a2", stream=False).status_code == 200
    assert call("GET", "/gateway/v1/models", headers=bearer(gateway_key)).status_code == 200
    at = {"route": route.name, "endpoint": "responses"}
    assert grew("compactweb_gateway_requests_total", **at, mode="upstream", status="200") == 2
    assert grew("compactweb_gateway_requests_total", route=route.name, endpoint="models", mode="upstream",
                status="200") == 1
    assert grew("compactweb_gateway_time_to_first_byte_seconds_count", **at) == 2
    assert grew("compactweb_gateway_request_duration_seconds_count", **at) == 2
    assert grew("compactweb_gateway_request_duration_seconds_sum", **at) >= grew(
        "compactweb_gateway_time_to_first_byte_seconds_sum", **at) > 0
    assert grew("compactweb_gateway_client_hangups_total", **at) == 0
    assert grew("compactweb_gateway_upstream_errors_total", route=route.name, reason="unreachable") == 0


def test_refused_requests_are_counted_with_their_status_and_no_route_before_the_key(client, sim_upstream, route,
                                                                                      gateway_key):
    grew = Grew(client)
    assert call("POST", "/gateway/v1/responses", json={"input": []}, headers=bearer("cwg_nope")).status_code == 401
    assert call("GET", "/gateway/v1/nowhere", headers=bearer(gateway_key)).status_code == 404
    assert call("POST", "/gateway/v1/responses", content=b"not json", headers=bearer(gateway_key)).status_code == 400
    assert grew("compactweb_gateway_requests_total", route="none", endpoint="responses", mode="none",
                status="401") == 1
    assert grew("compactweb_gateway_requests_total", route="none", endpoint="other", mode="none", status="404") == 1
    assert grew("compactweb_gateway_requests_total", route=route.name, endpoint="responses", mode="upstream",
                status="400") == 1


def test_an_upstream_that_does_not_answer_is_an_upstream_error(client, sim_upstream, route, gateway_key,
                                                               monkeypatch):
    def unreachable(config):
        def refuse(request):
            raise httpx.ConnectError("connection refused")

        return httpx.AsyncClient(transport=httpx.MockTransport(refuse))

    monkeypatch.setattr(upstream, "client_for", unreachable)
    grew = Grew(client)
    assert turn(gateway_key, "0190aaaa-0000-7000-8000-0000000000b1").status_code == 502
    assert grew("compactweb_gateway_upstream_errors_total", route=route.name, reason="unreachable") == 1
    assert grew("compactweb_gateway_requests_total", route=route.name, endpoint="responses", mode="upstream",
                status="502") == 1


def test_an_upstream_5xx_passed_on_is_an_upstream_error_and_a_4xx_is_not(client, sim_upstream, route, gateway_key,
                                                                         monkeypatch):
    statuses = iter([503, 429])

    def failing(config):
        def answer(request):
            status = next(statuses)
            return httpx.Response(status, json={"error": {"code": "server_error" if status == 503 else
                                                          "rate_limit_exceeded", "message": "no"}})

        return httpx.AsyncClient(transport=httpx.MockTransport(answer))

    monkeypatch.setattr(upstream, "client_for", failing)
    grew = Grew(client)
    assert turn(gateway_key, "0190aaaa-0000-7000-8000-0000000000c1").status_code == 503
    assert turn(gateway_key, "0190aaaa-0000-7000-8000-0000000000c2").status_code == 429
    assert grew("compactweb_gateway_upstream_errors_total", route=route.name, reason="upstream_status") == 1
    assert grew("compactweb_gateway_requests_total", route=route.name, endpoint="responses", mode="upstream",
                status="429") == 1


def test_a_server_whose_send_fails_after_a_hang_up_has_it_counted_as_one(client, sim_upstream, route, gateway_key):
    """An ASGI server that raises on a send to a client that left (the ASGI spec allows an OSError there; Daphne
    never does: it says so with `http.disconnect`, which tests/scale_out/test_gateway_metrics_on_daphne.py and
    tests/scale_out/test_gateway_on_daphne.py prove with real sockets). The pump's other way of noticing a hang-up,
    through the wrapper the dashboard's router mounts."""
    body = json.dumps({"model": "compactweb-sim", "stream": True, "input": [BASE, user("hello")]}).encode()
    headers = [(b"authorization", f"Bearer {gateway_key}".encode()), (b"content-type", b"application/json"),
               (b"x-codex-turn-metadata", json.dumps({"thread_id": "0190aaaa-0000-7000-8000-0000000000d1",
                                                      "turn_id": "t1"}).encode())]
    scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": headers, "query_string": b""}

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.body" and message.get("body"):
            raise OSError("the client closed the connection")

    async def go():
        await gateway_metrics.observed(proxy.app)(scope, receive, send)
        await proxy.drain()

    grew = Grew(client)
    async_to_sync(go)()
    assert grew("compactweb_gateway_client_hangups_total", route=route.name, endpoint="responses") == 1


def test_the_recorder_queue_is_empty_once_drained_and_each_exchange_waited_is_observed(client, sim_upstream,
                                                                                      gateway_key):
    grew = Grew(client)
    turn(gateway_key, "0190aaaa-0000-7000-8000-0000000000e1")  # `call` drains the recorder before answering
    after = scrape(client)
    assert grew("compactweb_gateway_recorder_wait_seconds_count") == 1
    assert after.value("compactweb_gateway_recorder_queue_depth") == 0
    assert after.value("compactweb_gateway_recorder_oldest_age_seconds") == 0


def test_compactweb_mode_is_the_mode_label(client, sim_upstream):
    route = make_route(mode="compactweb")
    from gateway_app.keys import do_create_gateway_key

    key = do_create_gateway_key(route=route, client_name="bob").key
    grew = Grew(client)
    assert turn(key, "0190aaaa-0000-7000-8000-0000000000f1").status_code == 200
    assert grew("compactweb_gateway_requests_total", route=route.name, endpoint="responses", mode="compactweb",
                status="200") == 1


def test_exchanges_waiting_behind_a_stuck_recorder_show_as_its_depth_and_age(client, sim_upstream, gateway_key):
    """The recorder thread is held (a slow database, as far as the queue can tell): the requests still answer, and
    /metrics shows the exchanges waiting and how old the oldest is; once it moves on, the queue is empty again."""
    gate = threading.Event()
    holder = threading.Thread(target=recorder.recorder.run_sync, args=(gate.wait,))
    holder.start()
    app = http_router(get_asgi_application())

    async def turns():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            for thread in ("0190aaaa-0000-7000-8000-0000000000g1", "0190aaaa-0000-7000-8000-0000000000g2"):
                body = {"model": "compactweb-sim", "input": [BASE, user("hello")]}
                answer = await http.post("/gateway/v1/responses", json=body,
                                         headers={**bearer(gateway_key), **meta(thread)})
                assert answer.status_code == 200

    try:
        async_to_sync(turns)()
        stuck = scrape(client)
        assert stuck.value("compactweb_gateway_recorder_queue_depth") == 2
        assert stuck.value("compactweb_gateway_recorder_oldest_age_seconds") > 0
    finally:
        gate.set()
        holder.join(timeout=30)
    async_to_sync(proxy.drain)()
    assert scrape(client).value("compactweb_gateway_recorder_queue_depth") == 0


def test_an_upstream_stream_cut_mid_answer_is_an_upstream_error_on_a_200(client, sim_upstream, route, gateway_key,
                                                                         monkeypatch):
    class Cut(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'event: response.created\ndata: {"type": "response.created", "response": {"id": "r1"}}\n\n'
            raise httpx.ReadError("the upstream closed the connection")

    def cutting(config):
        return httpx.AsyncClient(transport=httpx.MockTransport(
            lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Cut())))

    monkeypatch.setattr(upstream, "client_for", cutting)
    grew = Grew(client)
    response = turn(gateway_key, "0190aaaa-0000-7000-8000-0000000000h1")
    assert response.status_code == 200 and "response.failed" in response.text
    assert grew("compactweb_gateway_upstream_errors_total", route=route.name, reason="stream_failed") == 1
    assert grew("compactweb_gateway_upstream_errors_total", route=route.name, reason="upstream_status") == 0


@pytest.mark.parametrize("split_at", [len(b"event: response.fa"), len(b"event: response.failed\ndata: {")])
def test_an_upstream_failed_event_split_across_chunks_is_an_upstream_error(client, sim_upstream, route, gateway_key,
                                                                           monkeypatch, split_at):
    """The upstream's own `response.failed`, cut by its chunks inside the event line or with its data running on
    over a later chunk: the metrics see it all the same (the review found them matching the last chunk only)."""
    failed = (b'event: response.failed\ndata: {"type": "response.failed", "response": {"id": "r1", "status": '
              b'"failed", "error": {"code": "server_error", "message": "' + b"x" * 300 + b'"}}}\n\n')

    class Split(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'event: response.created\ndata: {"type": "response.created", "response": {"id": "r1"}}\n\n'
            for piece in (failed[:split_at], failed[split_at:split_at + 100], failed[split_at + 100:]):
                await asyncio.sleep(0.05)  # each its own chunk (the gateway joins only what arrives at once)
                yield piece

    def splitting(config):
        return httpx.AsyncClient(transport=httpx.MockTransport(
            lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Split())))

    monkeypatch.setattr(upstream, "client_for", splitting)
    grew = Grew(client)
    response = turn(gateway_key, f"0190aaaa-0000-7000-8000-0000000000j{split_at % 10}")
    assert response.status_code == 200 and response.text.count("response.failed") == 2  # event line and type
    assert grew("compactweb_gateway_upstream_errors_total", route=route.name, reason="stream_failed") == 1
