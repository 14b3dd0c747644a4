"""Issue 14: the simulated model at /sim is served only when enabled, only to callers who show the sim token, an
operator's API token or an operator's dashboard login, only for allowed hosts, with capped bodies and faults."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application

from compaction_app.providers.simulated.faults import FaultSyntaxError, parse_faults
from compactweb.api_tokens import issue_token
from compactweb.routing import http_router

SIM_TOKEN = "a-long-random-sim-token"
USER = {"role": "user", "content": "hello"}


def call(method: str, path: str, *, host: str = "127.0.0.1", app=None, **kwargs) -> httpx.Response:
    """One request through the dashboard's HTTP router (the app Daphne serves)."""
    app = app or http_router(get_asgi_application())

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
            return await client.request(method, path, **kwargs)

    return async_to_sync(go)()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(autouse=True)
def sim_token(settings, monkeypatch):
    settings.COMPACTWEB_SIM_TOKEN = SIM_TOKEN
    # The guard reads users through channels' database_sync_to_async, which closes "old" connections around the
    # call: that would close the test's transaction-wrapped connection.
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)


def test_an_anonymous_caller_is_refused_with_401_in_the_openai_shape(db):
    response = call("POST", "/sim/v1/responses", json={"model": "m", "input": [USER]})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("authorization", ["Bearer wrong", f"Token {SIM_TOKEN}", f"Bearer {SIM_TOKEN}x", "Bearer",
                                           f"Basic {SIM_TOKEN}"])
def test_a_wrong_or_misplaced_token_is_refused(db, authorization):
    assert call("GET", "/sim/v1/models", headers={"Authorization": authorization}).status_code == 401


def test_the_sim_token_as_a_bearer_is_accepted_as_an_openai_client_sends_it(db):
    response = call("GET", "/sim/v1/models", headers=bearer(SIM_TOKEN))
    assert response.status_code == 200 and response.json()["object"] == "list"


def test_the_sim_token_in_x_api_key_is_accepted_as_an_anthropic_client_sends_it_and_a_wrong_one_is_not(db):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": [USER]}
    response = call("POST", "/sim/anthropic/v1/messages", headers={"x-api-key": SIM_TOKEN}, json=body)
    assert response.status_code == 200 and response.json()["type"] == "message"
    assert call("POST", "/sim/anthropic/v1/messages", headers={"x-api-key": "wrong"}, json=body).status_code == 401
    assert call("POST", "/sim/anthropic/v1/messages", json=body).status_code == 401


def test_no_shared_token_configured_means_the_empty_bearer_never_matches(db, settings):
    settings.COMPACTWEB_SIM_TOKEN = ""
    assert call("GET", "/sim/v1/models", headers={"Authorization": "Bearer "}).status_code == 401


def test_an_operators_api_token_is_accepted_and_a_roleless_users_is_not(make_user):
    operator_token = issue_token(user=make_user("operator"))
    roleless_token = issue_token(user=make_user(None))
    assert call("GET", "/sim/v1/models", headers=bearer(operator_token)).status_code == 200
    assert call("GET", "/sim/v1/models", headers={"Authorization": f"Token {operator_token}"}).status_code == 200
    assert call("GET", "/sim/v1/models", headers=bearer(roleless_token)).status_code == 401


def test_the_dashboard_session_of_an_operator_is_accepted(client, make_user):
    client.force_login(make_user("operator"))
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    assert call("GET", "/sim/v1/models", headers={"Cookie": cookie}).status_code == 200


def test_the_session_of_a_user_without_a_role_is_refused(client, make_user):
    client.force_login(make_user(None))
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    assert call("GET", "/sim/v1/models", headers={"Cookie": cookie}).status_code == 401
    assert call("GET", "/sim/v1/models", headers={"Cookie": "sessionid=forged; x=\"y"}).status_code == 401


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "localhost.evil.example"])
def test_a_host_outside_allowed_hosts_is_a_400(db, host):
    response = call("GET", "/sim/v1/models", host=host, headers=bearer(SIM_TOKEN))
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_host"


def test_an_allowed_host_with_a_port_is_accepted(db):
    assert call("GET", "/sim/v1/models", host="localhost:8000", headers=bearer(SIM_TOKEN)).status_code == 200


def test_when_disabled_sim_is_not_mounted_at_all(db, settings):
    settings.COMPACTWEB_SIM_ENABLED = False
    response = call("GET", "/sim/v1/models", headers=bearer(SIM_TOKEN))
    assert response.status_code == 404 and "object" not in response.text


def test_a_body_over_the_cap_is_a_413_before_it_is_read(db, settings):
    settings.COMPACTWEB_SIM_MAX_BODY_BYTES = 10_000
    big = {"model": "m", "input": [{"role": "user", "content": "x" * 20_000}]}
    response = call("POST", "/sim/v1/responses", json=big, headers=bearer(SIM_TOKEN))
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"

    async def chunks():  # no Content-Length: the cap applies while reading
        for _ in range(5):
            yield b" " * 4000

    streamed = call("POST", "/sim/v1/responses", content=chunks(), headers=bearer(SIM_TOKEN))
    assert streamed.status_code == 413


@pytest.mark.parametrize("fault", ["slow=1e9", "slow=31", "slow=nan", "slow=inf", "overloaded;times=1000000",
                                   "overloaded;retry_after=99999999", "overloaded;retry_after=soon",
                                   "overloaded;times=²", "overloaded;key=" + "k" * 65, ",".join(["server_error"] * 17),
                                   "overloaded;key=" + "k" * 2000])
def test_every_fault_parameter_is_capped(db, fault):
    response = call("POST", "/sim/v1/responses", json={"model": "m", "input": [USER]},
                    headers={**bearer(SIM_TOKEN), "X-Sim-Fault": fault.encode()})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_fault_header"


@pytest.mark.parametrize("window", ["99999999999", "²", "0"])
def test_the_context_window_header_is_capped(db, window):
    response = call("POST", "/sim/v1/responses", json={"model": "m", "input": [USER]},
                    headers={**bearer(SIM_TOKEN), "X-Sim-Context-Window": window.encode()})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_header"


@pytest.mark.parametrize("header", ["overloaded;times=²", "overloaded;retry_after=١٢"])
def test_unicode_digits_are_not_numbers(header):
    with pytest.raises(FaultSyntaxError):
        parse_faults(header)


def test_deeply_nested_json_is_a_400_not_a_crash(db):
    nested = b'{"model": "m", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = call("POST", "/sim/v1/responses", content=nested,
                    headers={**bearer(SIM_TOKEN), "Content-Type": "application/json"})
    assert response.status_code == 400


def test_a_decompression_bomb_in_an_items_encrypted_content_is_a_400(db):
    from tests.compaction_app.providers.simulated.test_codec import bomb

    body = {"model": "m", "input": [USER, {"type": "compaction", "encrypted_content": bomb()}, USER]}
    response = call("POST", "/sim/v1/responses", headers=bearer(SIM_TOKEN), json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert "inflates past" in response.json()["error"]["message"]


def _operator_cookie(client, make_user) -> str:
    client.force_login(make_user("operator"))
    return f"sessionid={client.cookies['sessionid'].value}"


@pytest.mark.parametrize("origin", [None, "http://evil.example", "http://127.0.0.1:9999", "null"])
def test_a_cookie_post_from_another_origin_or_none_is_a_403(client, make_user, origin):
    headers = {"Cookie": _operator_cookie(client, make_user)}
    if origin:
        headers["Origin"] = origin
    response = call("POST", "/sim/v1/responses", headers=headers, json={"model": "m", "input": [USER]})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf_failed"


def test_a_cookie_post_from_the_dashboards_own_origin_is_served(client, make_user):
    headers = {"Cookie": _operator_cookie(client, make_user), "Origin": "http://127.0.0.1"}
    response = call("POST", "/sim/v1/responses", headers=headers, json={"model": "m", "input": [USER]})
    assert response.status_code == 200


def test_a_token_post_needs_no_origin(db):
    assert call("POST", "/sim/v1/responses", headers=bearer(SIM_TOKEN),
                json={"model": "m", "input": [USER]}).status_code == 200
