"""Issue 29: the gateway passes Codex's requests through to the route's upstream and answers what it answered."""

from __future__ import annotations

import json

import pytest

from gateway_app.models import GatewayAttempt, GatewayKey
from tests.gateway_app.conftest import UPSTREAM_KEY, call, make_route

pytestmark = pytest.mark.django_db(transaction=True)


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


BASE = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}


def meta(thread: str, turn: str = "turn-1", kind: str = "turn") -> dict:
    return {"x-codex-turn-metadata": json.dumps({"session_id": thread, "thread_id": thread, "turn_id": turn,
                                                  "request_kind": kind, "window_number": 0})}


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def events(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def test_without_a_gateway_key_the_answer_is_401_in_the_api_error_shape(sim_upstream, route):
    for headers in ({}, bearer("cwg_not-a-key"), bearer(UPSTREAM_KEY), {"Authorization": "Token cwg_x"}):
        response = call("POST", "/gateway/v1/responses", json={"model": "m", "input": [user("hi")]}, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"
    assert sim_upstream.requests() == []


def test_a_live_key_sent_under_another_scheme_than_bearer_is_refused(sim_upstream, gateway_key):
    for scheme in ("Token", "Basic"):
        response = call("GET", "/gateway/v1/models", headers={"Authorization": f"{scheme} {gateway_key}"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"
    assert call("GET", "/gateway/v1/models", headers={"Authorization": f"bearer {gateway_key}"}).status_code == 200


def test_a_key_sent_after_the_bearer_scheme_and_several_spaces_is_read(sim_upstream, gateway_key):
    # (RFC 9110 §11.4: one or more spaces separate the scheme from the credentials)
    response = call("GET", "/gateway/v1/models", headers={"Authorization": f"Bearer   {gateway_key}"})
    assert response.status_code == 200


def test_a_revoked_key_is_refused(sim_upstream, route, gateway_key):
    GatewayKey.objects.update(revoked=True)
    response = call("GET", "/gateway/v1/models", headers=bearer(gateway_key))
    assert response.status_code == 401


def test_keys_are_stored_as_digests_only(gateway_key):
    row = GatewayKey.objects.get()
    assert gateway_key not in json.dumps(list(GatewayKey.objects.values()), default=str)
    assert row.prefix == gateway_key[:10] and len(row.digest) == 64


def test_a_streamed_response_passes_through_with_the_upstreams_key_not_the_clients(sim_upstream, gateway_key):
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("please fix parser bug 3")]}
    response = call("POST", "/gateway/v1/responses", json=body, headers={**bearer(gateway_key),
                                                                          **meta("0190aaaa-0000-7000-8000-000000000001")})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    kinds = [e["type"] for e in events(response.text)]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    (seen,) = sim_upstream.seen_headers
    assert seen["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "x-codex-turn-metadata" in seen
    (received,) = sim_upstream.requests()
    assert received["body"]["input"] == body["input"]


def test_models_are_the_upstreams(sim_upstream, gateway_key):
    response = call("GET", "/gateway/v1/models", headers=bearer(gateway_key))
    assert response.status_code == 200 and response.json()["data"][0]["id"] == "compactweb-sim"


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'{"input": 3}', b'{"input": [1]}'])
def test_a_malformed_body_is_400_and_never_forwarded(sim_upstream, gateway_key, raw):
    response = call("POST", "/gateway/v1/responses", content=raw, headers=bearer(gateway_key))
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert sim_upstream.requests() == []


def test_a_body_over_the_routes_limit_is_413(sim_upstream, db):
    from gateway_app.keys import do_create_gateway_key

    small = make_route(max_body=200)
    key = do_create_gateway_key(route=small, client_name="ci").key
    response = call("POST", "/gateway/v1/responses", json={"input": [user("x" * 500)]}, headers=bearer(key))
    assert response.status_code == 413
    assert sim_upstream.requests() == []


def test_requests_over_the_routes_rate_are_429_naming_the_route_and_its_rate(sim_upstream, db):
    from gateway_app.keys import do_create_gateway_key

    slow = make_route(rpm=2)
    key = do_create_gateway_key(route=slow, client_name="ci").key
    responses = [call("GET", "/gateway/v1/models", headers=bearer(key)) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    error = responses[2].json()["error"]
    assert (error["code"], error["message"]) == ("rate_limit_exceeded",
                                                 f"route {slow.name} allows 2 requests per minute")


def test_an_upstream_error_reaches_the_client_unchanged_and_is_recorded(sim_upstream, gateway_key):
    headers = {**bearer(gateway_key), **meta("0190aaaa-0000-7000-8000-000000000002"),
               "x-sim-fault": "overloaded;retry_after=7"}
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("hello")]}
    response = call("POST", "/gateway/v1/responses", json=body, headers=headers)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    attempt = GatewayAttempt.objects.get()
    assert attempt.status == 429 and "rate_limit_exceeded" in attempt.error
    assert attempt.gateway_session is not None


def test_an_unreachable_upstream_is_502_and_recorded(monkeypatch, route, gateway_key):
    import httpx

    from gateway_app import upstream

    def refuse(request):
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(upstream, "client_for", lambda config: httpx.AsyncClient(transport=httpx.MockTransport(refuse)))
    response = call("POST", "/gateway/v1/responses", json={"input": [BASE, user("x")]}, headers=bearer(gateway_key))
    assert response.status_code == 502 and response.json()["error"]["code"] == "upstream_unreachable"
    assert GatewayAttempt.objects.get().status == 502


def test_an_upstream_the_outbound_rule_refuses_now_receives_nothing(sim_upstream, gateway_key, route, settings):
    """Issue 27: the route's provider is checked again before each request; refused (here: moved to a link-local
    address behind the validators' back), nothing is sent and no key is read."""
    from compaction_app.models import Provider

    Provider.objects.filter(pk=route.provider_id).update(base_url="http://169.254.169.254/v1")
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("hi")]}
    response = call("POST", "/gateway/v1/responses", json=body, headers=bearer(gateway_key))
    assert response.status_code == 502
    assert "COMPACTWEB_OUTBOUND_ALLOW" in response.json()["error"]["message"]
    assert sim_upstream.requests() == [] and sim_upstream.seen_headers == []


def test_a_stalled_recorder_delays_the_record_not_the_stream(sim_upstream, gateway_key, monkeypatch):
    import asyncio
    import threading

    import httpx
    from asgiref.sync import async_to_sync
    from django.core.asgi import get_asgi_application

    from compactweb.routing import http_router
    from gateway_app import proxy, recording

    release, started = threading.Event(), threading.Event()
    real = recording.do_record_exchange

    def stalled(**kwargs):
        started.set()
        assert release.wait(30)
        return real(**kwargs)

    monkeypatch.setattr(recording, "do_record_exchange", stalled)
    app = http_router(get_asgi_application())
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("hello")]}

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            first = await client.post("/gateway/v1/responses", json=body, headers=bearer(gateway_key))
            assert await asyncio.to_thread(started.wait, 30)  # the recorder is now stuck on the first record
            second = await client.post("/gateway/v1/responses", json=body, headers=bearer(gateway_key))
        # The second answer streamed whole while the recorder was stuck.
        assert not release.is_set()
        release.set()
        await proxy.drain()
        return first, second

    first, second = async_to_sync(go)()
    for response in (first, second):
        assert response.status_code == 200 and events(response.text)[-1]["type"] == "response.completed"
    from sessions_app.models import Session

    assert Session.objects.filter(source="gateway").count() == 1
