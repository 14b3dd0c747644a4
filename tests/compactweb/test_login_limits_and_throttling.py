"""Issue 14: repeated failed logins are locked out (django-axes) on the login page and the admin login, and the
API is throttled per address (anonymous) and per user, answering 429 in the API's error shape."""

from __future__ import annotations

import pytest
from django.test import Client

PASSWORD = "pw-for-tests-only"


def _fail(client: Client, url: str, username: str, times: int) -> list[int]:
    return [client.post(url, {"username": username, "password": "wrong"}).status_code for _ in range(times)]


@pytest.mark.parametrize("url", ["/login/", "/admin/login/"])
def test_after_five_failed_logins_even_the_right_password_is_locked_out(make_user, settings, url):
    user = make_user("admin", password=PASSWORD)
    client = Client()
    assert _fail(client, url, user.username, settings.AXES_FAILURE_LIMIT - 1) == [200] * 4  # the form again
    assert _fail(client, url, user.username, 1) == [429]
    locked = client.post(url, {"username": user.username, "password": PASSWORD})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session


def test_the_lockout_is_per_username_and_address(make_user, settings):
    victim, other = make_user("operator", password=PASSWORD), make_user("operator", password=PASSWORD)
    _fail(Client(), "/login/", victim.username, settings.AXES_FAILURE_LIMIT)
    elsewhere = Client(REMOTE_ADDR="10.9.8.7")
    assert elsewhere.post("/login/", {"username": victim.username, "password": PASSWORD}).status_code == 302
    assert Client().post("/login/", {"username": other.username, "password": PASSWORD}).status_code == 302


def test_a_spoofed_forwarded_for_header_does_not_escape_the_lockout(make_user, settings):
    user = make_user("operator", password=PASSWORD)
    _fail(Client(), "/login/", user.username, settings.AXES_FAILURE_LIMIT)
    spoofing = Client(HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert spoofing.post("/login/", {"username": user.username, "password": PASSWORD}).status_code == 429


def test_a_successful_login_below_the_limit_resets_the_count(make_user, settings):
    user = make_user("operator", password=PASSWORD)
    client = Client()
    _fail(client, "/login/", user.username, settings.AXES_FAILURE_LIMIT - 1)
    assert client.post("/login/", {"username": user.username, "password": PASSWORD}).status_code == 302
    client.logout()
    assert _fail(client, "/login/", user.username, settings.AXES_FAILURE_LIMIT - 1) == [200] * 4


def test_each_user_is_throttled_on_their_own(make_user, settings, api_client_for):
    settings.COMPACTWEB_THROTTLE_RATES = {"user": "2/minute"}
    first, second = api_client_for(make_user("operator")), api_client_for(make_user("operator"))
    assert [first.get("/api/v1/sessions").status_code for _ in range(3)] == [200, 200, 429]
    throttled = first.post("/api/v1/sessions", {}, format="json")
    assert throttled.status_code == 429 and throttled.json()["error"]["code"] == "throttled"
    assert int(throttled["Retry-After"]) > 0
    assert second.get("/api/v1/sessions").status_code == 200


def test_a_wrong_token_is_refused_before_any_work(db, anon_api):
    """No API endpoint is open to anonymous callers, so DRF refuses them (401) before throttling; guessing a token
    means guessing 256 random bits, and the login page is limited by axes."""
    response = anon_api.get("/api/v1/sessions", HTTP_AUTHORIZATION="Token " + "0" * 64)
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
