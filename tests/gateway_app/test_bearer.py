"""Issue 29: a route may pass the client's own bearer through to the upstream (the gateway key then travels in
x-compactweb-gateway-key); the bearer reaches the upstream and is never stored or logged."""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import call_command

from gateway_app.keys import do_create_gateway_key
from tests.gateway_app.conftest import UPSTREAM_KEY, call, make_route
from tests.gateway_app.test_proxy import BASE, meta, user

pytestmark = pytest.mark.django_db(transaction=True)

OWN = "sk-own-token-of-alice-7f3e9c"


def _post(key: str, *, bearer: str = OWN):
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("please fix parser bug 3")]}
    return call("POST", "/gateway/v1/responses", json=body, headers={
        "Authorization": f"Bearer {bearer}", "x-compactweb-gateway-key": key,
        **meta("0190dddd-0000-7000-8000-000000000001")})


def test_a_passing_route_sends_the_clients_bearer_upstream_and_keeps_it_nowhere(sim_upstream, caplog):
    route = make_route()
    route.pass_client_bearer = True
    route.save()
    key = do_create_gateway_key(route=route, client_name="alice").key
    caplog.set_level(logging.DEBUG)
    response = _post(key)
    assert response.status_code == 200
    assert sim_upstream.seen_headers[-1]["authorization"] == f"Bearer {OWN}"
    assert "x-compactweb-gateway-key" not in sim_upstream.seen_headers[-1]
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert "fix parser bug" in dump.getvalue()  # the exchange was recorded ...
    assert OWN not in dump.getvalue()  # ... without the bearer
    assert OWN not in caplog.text


def test_a_route_that_does_not_pass_it_sends_the_providers_key(sim_upstream):
    key = do_create_gateway_key(route=make_route(), client_name="alice").key
    assert _post(key).status_code == 200
    assert sim_upstream.seen_headers[-1]["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_the_clients_bearer_is_not_a_gateway_key(sim_upstream):
    route = make_route()
    route.pass_client_bearer = True
    route.save()
    response = _post("", bearer=OWN)
    assert response.status_code == 401
    assert json.loads(response.text)["error"]["code"] == "invalid_api_key"
    assert sim_upstream.requests() == []


def test_a_passing_route_never_sends_the_gateway_key_upstream_when_it_came_as_the_bearer(sim_upstream):
    # No x-compactweb-gateway-key: the bearer is the gateway key, not the client's own, so there is nothing to pass.
    route = make_route()
    route.pass_client_bearer = True
    route.save()
    key = do_create_gateway_key(route=route, client_name="alice").key
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("please fix parser bug 3")]}
    response = call("POST", "/gateway/v1/responses", json=body, headers={
        "Authorization": f"Bearer {key}", **meta("0190dddd-0000-7000-8000-000000000002")})
    assert response.status_code == 200
    assert key not in json.dumps(sim_upstream.seen_headers[-1])
    assert sim_upstream.seen_headers[-1]["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_a_passing_route_sends_the_providers_key_when_the_client_sent_credentials_of_another_scheme(sim_upstream):
    # Only a Bearer token is the client's own bearer: Basic credentials are not passed on under "Bearer".
    route = make_route()
    route.pass_client_bearer = True
    route.save()
    key = do_create_gateway_key(route=route, client_name="alice").key
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("please fix parser bug 3")]}
    response = call("POST", "/gateway/v1/responses", json=body, headers={
        "Authorization": "Basic YWxpY2U6c2VjcmV0", "x-compactweb-gateway-key": key,
        **meta("0190dddd-0000-7000-8000-000000000003")})
    assert response.status_code == 200
    assert sim_upstream.seen_headers[-1]["authorization"] == f"Bearer {UPSTREAM_KEY}"
