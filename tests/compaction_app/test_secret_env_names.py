"""Issue 14 (high): only environment variables the deployment allowed may be named as secrets, so whoever may
configure a provider cannot send DJANGO_SECRET_KEY or DATABASE_URL to a URL of their choosing. One rule for the
JSON API, the Django admin and the run time."""

from __future__ import annotations

import pytest

from compaction_app.models import CompactionPolicy, Provider
from compaction_app.providers.secret_env import is_allowed_secret_env, secret_env_problem
from sessions_app.rollout.services import do_create_session
from tests.fakes.scripted_provider import (
    Reply,
    ScriptedProvider,
    assistant,
    completed,
    created,
    output_item_done,
)

SERVER_SECRETS = ["DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "HOME", "PATH"]


COLLECTOR = "https://collector.example.invalid/v1"
# The names these tests accept, bound to the URL they use (issue 27: a key goes only where the deployment bound it;
# tests/compaction_app/test_provider_key_bindings.py proves that rule).
BOUND = ["COMPACTWEB_KEY_OPENAI", "COMPACTWEB_KEY_EXFIL", "OPENAI_API_KEY", "COMPACTWEB_KEY_X"]


@pytest.fixture(autouse=True)
def _bound_to_the_collector(settings):
    settings.COMPACTWEB_PROVIDER_KEYS = ";".join(f"{name}={COLLECTOR}" for name in BOUND)


def provider_body(**fields):
    return {"name": "exfil", "base_url": COLLECTOR, "model": "m", **fields}


@pytest.mark.parametrize("name", SERVER_SECRETS)
def test_the_api_refuses_a_server_variable_as_api_key_env_and_stores_nothing(admin_api, name):
    response = admin_api.post("/api/v1/providers", provider_body(api_key_env=name), format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["message"].startswith("api_key_env:")
    assert "COMPACTWEB_KEY_" in error["message"]
    assert not Provider.objects.filter(name="exfil").exists()


def test_the_api_refuses_changing_api_key_env_to_a_server_variable(admin_api, provider):
    response = admin_api.patch(f"/api/v1/providers/{provider.pk}", {"api_key_env": "DJANGO_SECRET_KEY"},
                               format="json")
    assert response.status_code == 400
    provider.refresh_from_db()
    assert provider.api_key_env == ""


def test_a_prefixed_name_is_accepted(admin_api):
    response = admin_api.post("/api/v1/providers", provider_body(api_key_env="COMPACTWEB_KEY_OPENAI"), format="json")
    assert response.status_code == 201, response.content
    assert Provider.objects.get(name="exfil").api_key_env == "COMPACTWEB_KEY_OPENAI"


def test_the_prefix_alone_is_not_a_name(admin_api):
    response = admin_api.post("/api/v1/providers", provider_body(api_key_env="COMPACTWEB_KEY_"), format="json")
    assert response.status_code == 400


def test_a_name_on_the_allow_list_is_accepted_and_the_prefix_can_be_switched_off(admin_api, settings):
    settings.COMPACTWEB_SECRET_ENV_NAMES = ["OPENAI_API_KEY"]
    settings.COMPACTWEB_SECRET_ENV_PREFIX = ""
    assert admin_api.post("/api/v1/providers", provider_body(api_key_env="OPENAI_API_KEY"),
                          format="json").status_code == 201
    refused = admin_api.post("/api/v1/providers", provider_body(name="b", api_key_env="COMPACTWEB_KEY_X"),
                             format="json")
    assert refused.status_code == 400
    assert "COMPACTWEB_SECRET_ENV_NAMES" in refused.json()["error"]["message"]


def admin_provider_form(client, admin_user_role, **fields) -> dict:
    """The admin's add-provider form as a browser posts it (logged in as the admin role), with `fields` set."""
    admin_user_role.is_staff = True  # as create_user makes admins
    admin_user_role.save()
    client.force_login(admin_user_role)
    form = client.get("/admin/compaction_app/provider/add/").context["adminform"].form
    # A callable initial (a JSONField's default=dict) is rendered as its value, as a browser would post it.
    initial = {name: field.initial() if callable(field.initial) else field.initial
               for name, field in form.fields.items()}
    data = {name: value for name, value in initial.items() if value not in (None, False)}
    data.update(fields)
    return data


def test_the_admin_form_refuses_a_server_variable(client, admin_user_role):
    data = admin_provider_form(client, admin_user_role, name="exfil", base_url=COLLECTOR, model="m",
                               api_key_env="DJANGO_SECRET_KEY")
    response = client.post("/admin/compaction_app/provider/add/", data)
    assert response.status_code == 200  # the form again, with the error
    assert "api_key_env" in response.context["adminform"].form.errors
    assert not Provider.objects.filter(name="exfil").exists()
    data["api_key_env"] = "COMPACTWEB_KEY_EXFIL"
    assert client.post("/admin/compaction_app/provider/add/", data).status_code == 302
    assert Provider.objects.filter(name="exfil").exists()


@pytest.fixture
def scripted():
    provider = ScriptedProvider()
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


def test_a_row_stored_before_the_rule_sends_no_key_when_a_turn_runs(scripted, operator_api, monkeypatch, settings):
    """A provider row written before the rule (or before the operator narrowed it) still names DJANGO_SECRET_KEY:
    the turn goes out without an Authorization header, so the secret never leaves."""
    settings.COMPACTWEB_PROVIDER_KEYS = f"DJANGO_SECRET_KEY={scripted.base_url};COMPACTWEB_KEY_GOOD={scripted.base_url}"
    monkeypatch.setenv("DJANGO_SECRET_KEY", "the-server-secret")
    monkeypatch.setenv("COMPACTWEB_KEY_GOOD", "sk-allowed")
    provider = Provider.objects.create(name="old", base_url=scripted.base_url, model="m", request_max_retries=0,
                                       stream_max_retries=0)
    Provider.objects.filter(pk=provider.pk).update(api_key_env="DJANGO_SECRET_KEY")  # bypasses validation
    policy = CompactionPolicy.objects.create(name="p")
    session = do_create_session(title="t", provider=provider, policy=policy, base_instructions="", items=[])
    turn = [created(), output_item_done(assistant("ok")), completed(input_tokens=5)]
    scripted.add(Reply.sse(turn), Reply.sse(turn))

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "hi"}, format="json")
    assert response.status_code in (200, 201), response.content
    assert "authorization" not in scripted.requests[-1].headers

    Provider.objects.filter(pk=provider.pk).update(api_key_env="COMPACTWEB_KEY_GOOD")
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "hi"}, format="json")
    assert response.status_code in (200, 201), response.content
    assert scripted.requests[-1].headers["authorization"] == "Bearer sk-allowed"


@pytest.mark.parametrize(("name", "allowed"), [
    ("COMPACTWEB_KEY_A", True), ("OPENAI_API_KEY", False), ("compactweb_key_a", False),
    ("COMPACTWEB_KEY_A B", False), ("1COMPACTWEB_KEY_A", False), ("", False),
])
def test_the_rule_is_prefix_or_allow_list(name, allowed):
    assert is_allowed_secret_env(name, prefix="COMPACTWEB_KEY_", allowed=()) is allowed
    assert is_allowed_secret_env("OPENAI_API_KEY", prefix="COMPACTWEB_KEY_", allowed=["OPENAI_API_KEY"])
    assert secret_env_problem("X", prefix="", allowed=()) is not None
