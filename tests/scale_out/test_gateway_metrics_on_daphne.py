"""Issue 45: what a real Daphne process tells the gateway's metrics about real sockets: a client that hangs up
mid-stream (Daphne's `http.disconnect`) is a hang-up, an upstream that dies mid-stream is an upstream error
(`stream_failed`) on a request the client got with status 200. Read back from that process's /metrics; the
upstream is the slow streaming server of tests/scale_out/gateway_upstream.py."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import CompactionPolicy, Provider
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayRoute
from tests.metrics_reading import TOKEN, Scrape
from tests.scale_out import processes as run
from tests.scale_out.gateway_upstream import SlowUpstream

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

ROUTE = "metrics-on-daphne"
UPSTREAM_KEY_ENV = "COMPACTWEB_KEY_METRICS_ON_DAPHNE"


@pytest.fixture
def daphne(on_postgresql, redis_url, tmp_path):
    """(Daphne's port, a gateway key of a route whose upstream is the slow server)."""
    upstream_port, port = run.free_port(), run.free_port()
    base_url = f"http://127.0.0.1:{upstream_port}/v1"
    provider = Provider.objects.create(name=ROUTE, base_url=base_url, model="slow-model", context_window=32000,
                                       api_key_env=UPSTREAM_KEY_ENV)
    route = GatewayRoute.objects.create(name=ROUTE, provider=provider,
                                        policy=CompactionPolicy.objects.create(name=ROUTE))
    env = {**run.child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path),
           UPSTREAM_KEY_ENV: "upstream-secret", "COMPACTWEB_PROVIDER_KEYS": f"{UPSTREAM_KEY_ENV}={base_url}",
           "COMPACTWEB_OUTBOUND_ALLOW": f"127.0.0.1:{upstream_port}", "COMPACTWEB_METRICS_TOKEN": TOKEN}
    with SlowUpstream(port=upstream_port):
        web = run.start_daphne(port=port, env=env, log=tmp_path / "daphne.log")
        try:
            yield port, do_create_gateway_key(route=route, client_name="laptop").key
        finally:
            run.stop(web)


def stream(port: int, key: str, mode: str, turn: str) -> http.client.HTTPResponse:
    """A streamed turn whose upstream answers as `mode` says (gateway_upstream: slow, die, or a short answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    meta = {"session_id": turn, "thread_id": turn, "turn_id": turn, "request_kind": "turn"}
    connection.request("POST", "/gateway/v1/responses", json.dumps(
        {"model": "slow-model", "stream": True, "input": [user_message(f"turn {turn}")]}), headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json",
        "x-codex-turn-metadata": json.dumps(meta), "x-codex-test-stream": mode})
    return connection.getresponse()


def scrape(port: int) -> Scrape:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    return Scrape(connection.getresponse().read().decode())


def eventually(port: int, name: str, expected: float, **labels) -> float:
    deadline = time.monotonic() + 60
    while (value := scrape(port).value(name, **labels)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return value


def test_a_hang_up_and_a_dead_upstream_stream_are_counted_by_the_daphne_that_saw_them(daphne):
    port, key = daphne
    at = {"route": ROUTE, "endpoint": "responses"}
    slow = stream(port, key, "slow", "0190eeee-0000-7000-8000-000000000001")
    assert slow.status == 200 and slow.read1(65536)  # the answer is streaming to the client ...
    slow.close()  # ... which hangs up
    assert eventually(port, "compactweb_gateway_client_hangups_total", 1, **at) == 1

    dying = stream(port, key, "die", "0190eeee-0000-7000-8000-000000000002")
    assert dying.status == 200 and b"event: response.failed" in dying.read()
    assert eventually(port, "compactweb_gateway_upstream_errors_total", 1, route=ROUTE, reason="stream_failed") == 1

    whole = stream(port, key, "short", "0190eeee-0000-7000-8000-000000000003")
    assert b"response.completed" in whole.read()
    metrics = scrape(port)
    assert metrics.value("compactweb_gateway_client_hangups_total", **at) == 1  # whole answers are no hang-up
    assert metrics.value("compactweb_gateway_upstream_errors_total", route=ROUTE, reason="stream_failed") == 1
    assert metrics.value("compactweb_gateway_requests_total", **at, mode="upstream", status="200") == 3
