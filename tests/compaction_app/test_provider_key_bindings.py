"""Issue 27: an allowed key is sent only to the base URLs the deployment bound it to (COMPACTWEB_PROVIDER_KEYS), so
whoever may configure providers cannot point a provider holding a permitted key at a listener of their own. Checked
by the JSON API and the admin form on save, and again before each send."""

from __future__ import annotations

import pytest

from compaction_app.models import CompactionPolicy, Provider
from compaction_app.providers.secret_env import key_binding_problem, parse_key_bindings, url_under
from sessions_app.rollout.services import do_create_session
from tests.compaction_app.test_secret_env_names import admin_provider_form
from tests.fakes.scripted_api import text_reply

OPENAI = "https://api.openai.example/v1"
ATTACKER = "https://collector.example.invalid/v1"


@pytest.fixture(autouse=True)
def _bindings(settings):
    settings.COMPACTWEB_PROVIDER_KEYS = f"COMPACTWEB_KEY_OPENAI={OPENAI};COMPACTWEB_KEY_ACCOUNT={OPENAI}"


def body(**fields):
    return {"name": "openai", "base_url": OPENAI, "model": "m", "api_key_env": "COMPACTWEB_KEY_OPENAI", **fields}


def test_a_bound_key_is_accepted_at_its_url(admin_api):
    assert admin_api.post("/api/v1/providers", body(), format="json").status_code == 201
    assert admin_api.post("/api/v1/providers", body(name="sub", base_url=f"{OPENAI}/"), format="json").status_code == 201


@pytest.mark.parametrize("fields", [
    {"base_url": ATTACKER},
    {"base_url": "https://api.openai.example/v10"},  # not under /v1 on a segment boundary
    {"base_url": "http://api.openai.example/v1"},  # another scheme
    {"base_url": "https://api.openai.example:8443/v1"},  # another port
    {"api_key_env": "COMPACTWEB_KEY_UNBOUND"},  # allowed by the prefix, bound nowhere
])
def test_a_key_pointed_anywhere_else_is_refused_and_nothing_stored(admin_api, fields):
    response = admin_api.post("/api/v1/providers", body(**fields), format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["message"].startswith("api_key_env:") and "COMPACTWEB_PROVIDER_KEYS" in error["message"]
    assert not Provider.objects.filter(name="openai").exists()


def test_moving_a_provider_with_a_key_to_another_url_is_refused(admin_api):
    created = admin_api.post("/api/v1/providers", body(), format="json").json()
    response = admin_api.patch(f"/api/v1/providers/{created['id']}", {"base_url": ATTACKER}, format="json")
    assert response.status_code == 400
    assert Provider.objects.get(pk=created["id"]).base_url == OPENAI


def test_a_header_from_the_environment_follows_the_same_binding(admin_api):
    response = admin_api.post("/api/v1/providers", body(base_url=ATTACKER, api_key_env="",
                                                        header_envs={"x-account": "COMPACTWEB_KEY_ACCOUNT"}),
                              format="json")
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("header_envs:")


def test_the_admin_form_refuses_a_key_pointed_elsewhere(client, admin_user_role):
    data = admin_provider_form(client, admin_user_role, name="exfil", base_url=ATTACKER, model="m",
                               api_key_env="COMPACTWEB_KEY_OPENAI")
    response = client.post("/admin/compaction_app/provider/add/", data)
    assert response.status_code == 200 and "api_key_env" in response.context["adminform"].form.errors
    assert not Provider.objects.filter(name="exfil").exists()


def test_a_row_moved_behind_the_validators_back_sends_no_key(scripted_sessions, monkeypatch, settings):
    """Bound to its real URL, the key is sent there; once the row points elsewhere (an UPDATE that skipped
    validation, a row from before the rule), the turn still runs but carries no Authorization header."""
    monkeypatch.setenv("COMPACTWEB_KEY_OPENAI", "sk-bound-to-openai")
    script = scripted_sessions.script
    settings.COMPACTWEB_PROVIDER_KEYS = f"COMPACTWEB_KEY_OPENAI={script.base_url}"
    provider = scripted_sessions.provider(api_key_env="COMPACTWEB_KEY_OPENAI")
    session = scripted_sessions.create(provider=provider)
    script.add(text_reply("one"), text_reply("two"))
    scripted_sessions.turn(session["id"], "hi")
    assert script.requests[-1].headers["authorization"] == "Bearer sk-bound-to-openai"

    settings.COMPACTWEB_PROVIDER_KEYS = f"COMPACTWEB_KEY_OPENAI={OPENAI}"  # the key now belongs elsewhere
    scripted_sessions.turn(session["id"], "again")

    assert "authorization" not in script.requests[-1].headers


def test_bindings_parse_and_match_on_path_segments():
    bindings = parse_key_bindings("A=https://h/v1 https://g/x; B=http://127.0.0.1:8000/sim/v1,embedded\nA=https://k")
    assert bindings == {"A": ("https://h/v1", "https://g/x", "https://k"),
                        "B": ("http://127.0.0.1:8000/sim/v1", "embedded")}
    assert url_under("https://H/v1/responses", "https://h/v1") and url_under("https://h:443/v1", "https://h/v1")
    assert not url_under("https://h/v10", "https://h/v1") and not url_under("https://h.evil/v1", "https://h/v1")
    assert not url_under("https://h@evil/v1", "https://h/v1")
    assert key_binding_problem("B", "embedded", bindings) is None
    assert "not bound" in key_binding_problem("C", "https://h/v1", bindings)


def test_the_embedded_model_needs_no_binding_when_no_key_is_named(admin_api):
    policy = CompactionPolicy.objects.create(name="p")
    created = admin_api.post("/api/v1/providers", body(name="sim", base_url="embedded", api_key_env=""), format="json")
    assert created.status_code == 201
    provider = Provider.objects.get(pk=created.json()["id"])
    assert do_create_session(title="t", provider=provider, policy=policy, base_instructions="", items=[]).pk
