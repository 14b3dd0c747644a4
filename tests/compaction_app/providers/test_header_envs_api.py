"""Extra request headers whose values come from named environment variables (issue 19; e.g. the account header a
ChatGPT-authenticated endpoint needs). The names follow the api_key_env rule (issue 14); values are read when a
request is built and never stored, shown or accepted."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_api import text_reply

pytestmark = pytest.mark.django_db

ACCOUNT = "acct-4f1e9c"


def provider_body(**fields):
    return {"name": "chatgpt", "base_url": "embedded", "model": "gpt-test", "context_window": 100_000, **fields}


@pytest.fixture(autouse=True)
def _account_bound(settings, served_script):
    """COMPACTWEB_KEY_ACCOUNT may go to the embedded model and the scripted provider (issue 27 bindings)."""
    settings.COMPACTWEB_PROVIDER_KEYS = f"COMPACTWEB_KEY_ACCOUNT=embedded {served_script.base_url}"


def test_a_header_from_an_allowed_variable_is_accepted_and_sent_but_its_value_never_stored(
        scripted_sessions, admin_api, monkeypatch):
    monkeypatch.setenv("COMPACTWEB_KEY_ACCOUNT", ACCOUNT)
    created = admin_api.post("/api/v1/providers", provider_body(
        header_envs={"chatgpt-account-id": "COMPACTWEB_KEY_ACCOUNT"}), format="json")
    assert created.status_code == 201, created.json()
    provider = scripted_sessions.provider(header_envs={"chatgpt-account-id": "COMPACTWEB_KEY_ACCOUNT"})
    session = scripted_sessions.create(provider=provider)
    scripted_sessions.script.add(text_reply())

    scripted_sessions.turn(session["id"], "hi")

    assert scripted_sessions.script.requests[0].headers["chatgpt-account-id"] == ACCOUNT
    shown = admin_api.get(f"/api/v1/providers/{created.json()['id']}").content.decode()
    rollout = scripted_sessions.api.get(f"/api/v1/sessions/{session['id']}/rollout")
    assert ACCOUNT not in shown and ACCOUNT not in b"".join(rollout.streaming_content).decode()
    assert created.json()["header_envs"] == {"chatgpt-account-id": "COMPACTWEB_KEY_ACCOUNT"}


def test_an_unset_variable_sends_no_header(scripted_sessions, monkeypatch):
    monkeypatch.delenv("COMPACTWEB_KEY_ACCOUNT", raising=False)
    provider = scripted_sessions.provider(header_envs={"chatgpt-account-id": "COMPACTWEB_KEY_ACCOUNT"})
    session = scripted_sessions.create(provider=provider)
    scripted_sessions.script.add(text_reply())

    scripted_sessions.turn(session["id"], "hi")

    assert "chatgpt-account-id" not in scripted_sessions.script.requests[0].headers


@pytest.mark.parametrize("header_envs", [
    {"chatgpt-account-id": "HOME"}, {"chatgpt-account-id": "PATH"}, {"Authorization": "COMPACTWEB_KEY_X"},
    {"bad header": "COMPACTWEB_KEY_X"}, {"x-account": ""}, ["COMPACTWEB_KEY_X"], {"x-account": 5},
])
def test_a_variable_outside_the_secret_rule_or_a_bad_header_is_400(admin_api, header_envs):
    response = admin_api.post("/api/v1/providers", provider_body(header_envs=header_envs), format="json")

    assert response.status_code == 400 and response.json()["error"]["code"]


def test_a_row_written_before_the_rule_narrowed_sends_nothing_outside_it(scripted_sessions, monkeypatch):
    monkeypatch.setenv("HOME_ACCOUNT", "leak")
    provider = scripted_sessions.provider(header_envs={"x-account": "HOME_ACCOUNT"})  # bypasses the validator
    session = scripted_sessions.create(provider=provider)
    scripted_sessions.script.add(text_reply())

    scripted_sessions.turn(session["id"], "hi")

    assert "x-account" not in scripted_sessions.script.requests[0].headers
