"""Issue 45: what a real Daphne process tells the gateway's metrics about real sockets: a client that hangs up
mid-stream (Daphne's `http.disconnect`) is a hang-up, an upstream that dies mid-stream is an upstream error
(`stream_failed`) on a request the client got with status 200. Read back from that process's /metrics."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from tests.metrics_reading import TOKEN, Scrape
from tests.scale_out.test_gateway_hang_up import gateway, read_all, read_until, request_bytes, user, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
__all__ = ["gateway"]  # the running Daphne with its slow upstream (tests/scale_out/test_gateway_hang_up.py)


@pytest.fixture
def metrics_token(monkeypatch):
    monkeypatch.setenv("COMPACTWEB_METRICS_TOKEN", TOKEN)  # the Daphne process inherits it


def scrape(port: int) -> Scrape:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return Scrape(response.read().decode())


def test_a_hang_up_and_a_dead_upstream_stream_are_counted_by_the_daphne_that_saw_them(metrics_token, gateway):
    port, key, upstream = gateway
    at = {"route": "hang-up", "endpoint": "responses"}
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(request_bytes(port, key, [user("write a long essay")], "slow", "turn-1"))
        assert b"word1 " in read_until(client, b"word1 ")
    assert wait_for(lambda: scrape(port).value("compactweb_gateway_client_hangups_total", **at) == 1)

    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(request_bytes(port, key, [user("hello")], "die", "turn-2"))
        assert b"event: response.failed" in read_all(client)
    assert wait_for(lambda: scrape(port).value("compactweb_gateway_upstream_errors_total", route="hang-up",
                                               reason="stream_failed") == 1)

    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(request_bytes(port, key, [user("hi")], "short", "turn-3"))
        assert b"response.completed" in read_all(client)
    metrics = scrape(port)
    assert metrics.value("compactweb_gateway_client_hangups_total", **at) == 1  # the whole answers are not
    assert metrics.value("compactweb_gateway_upstream_errors_total", route="hang-up", reason="stream_failed") == 1
    assert metrics.value("compactweb_gateway_time_to_first_byte_seconds_count", **at) == 3
