"""Issue 41: the pooled upstream client serves every client of a route, so it keeps no cookie one client's answer
set, and it asks for answers uncompressed (the gateway passes the bytes on as they come)."""

from __future__ import annotations

import json

import httpx
import pytest

from gateway_app import upstream
from gateway_app.keys import do_create_gateway_key
from tests.gateway_app.conftest import UPSTREAM_KEY, UPSTREAM_URL
from tests.gateway_app.test_proxy import BASE, bearer, user

pytestmark = pytest.mark.django_db(transaction=True)


class CookieSettingUpstream:
    """An upstream that sets a session cookie on every answer and notes the headers of each request."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        while (await receive()).get("more_body"):
            pass
        body = json.dumps({"id": "resp_1", "object": "response", "status": "completed", "output": []}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"),
            (b"set-cookie", f"upstream_session=client-{len(self.seen)}; Path=/".encode())]})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def cookie_upstream(monkeypatch, settings):
    app = CookieSettingUpstream()
    monkeypatch.setenv("COMPACTWEB_KEY_GATEWAY_TEST", UPSTREAM_KEY)
    settings.COMPACTWEB_PROVIDER_KEYS = f"COMPACTWEB_KEY_GATEWAY_TEST={UPSTREAM_URL}"
    # The real pooled client, with only its transport swapped for the app.
    monkeypatch.setattr(upstream, "transport_for", lambda config: httpx.ASGITransport(app=app))
    upstream._clients.clear()
    yield app
    upstream._clients.clear()


def test_no_cookie_of_one_client_goes_out_with_another_and_no_compression_is_asked_for(cookie_upstream, route):
    alice = do_create_gateway_key(route=route, client_name="alice").key
    bob = do_create_gateway_key(route=route, client_name="bob").key

    async def two_requests():
        # One event loop for both, so they share the one pooled client as a dashboard process's requests do.
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_router()), base_url="http://x") as client:
            for key in (alice, bob):
                body = {"model": "m", "stream": False, "input": [BASE, user("hi")]}
                response = await client.post("/gateway/v1/responses", json=body, headers=bearer(key))
                assert response.status_code == 200

    from asgiref.sync import async_to_sync

    async_to_sync(two_requests)()
    first, second = cookie_upstream.seen
    assert "cookie" not in second  # alice's upstream cookie did not go out with bob's request
    assert first["accept-encoding"] == second["accept-encoding"] == "identity"


def _router():
    from django.core.asgi import get_asgi_application

    from compactweb.routing import http_router

    return http_router(get_asgi_application())

