"""Providers and policies over the JSON API: admins write, keys never cross the API, bad settings are refused."""

import pytest

from compaction_app.models import CompactionPolicy, Prompt, Provider


def test_admin_creates_a_provider_and_reads_it_back(admin_api, settings):
    settings.COMPACTWEB_PROVIDER_KEYS = "COMPACTWEB_KEY_OPENAI=https://api.example.invalid/v1"
    body = {"name": "openai", "base_url": "https://api.example.invalid/v1", "model": "gpt-x", "api_key_env": "COMPACTWEB_KEY_OPENAI", "remote_compaction": "v2"}
    created = admin_api.post("/api/v1/providers", body, format="json")
    assert created.status_code == 201, created.content
    data = admin_api.get(f"/api/v1/providers/{created.json()['id']}").json()
    assert data["api_key_env"] == "COMPACTWEB_KEY_OPENAI"
    assert data["context_window"] == 272000 and data["effective_context_window_percent"] == 95
    assert data["usable_context_window"] == 258400  # spec §2.2
    assert data["stream_max_retries"] == 5 and data["request_max_retries"] == 4
    assert not any("key" in k and k != "api_key_env" for k in data)


@pytest.mark.parametrize("field", ["api_key", "secret", "password", "token"])
def test_a_provider_with_a_secret_field_is_refused_and_nothing_stored(admin_api, field):
    body = {"name": "leaky", "base_url": "embedded", "model": "m", field: "sk-should-never-be-stored"}
    response = admin_api.post("/api/v1/providers", body, format="json")
    assert response.status_code == 400
    assert "environment variable" in response.json()["error"]["message"]
    assert "sk-should-never-be-stored" not in response.content.decode()
    assert not Provider.objects.filter(name="leaky").exists()


def test_api_key_env_must_be_a_variable_name(admin_api, provider):
    response = admin_api.patch(f"/api/v1/providers/{provider.pk}", {"api_key_env": "sk-abc def"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("api_key_env:")


def test_retry_caps_follow_codex_limits(admin_api, provider):
    response = admin_api.patch(f"/api/v1/providers/{provider.pk}", {"stream_max_retries": 101}, format="json")
    assert response.status_code == 400
    provider.refresh_from_db()
    assert provider.stream_max_retries == 5


def test_admin_patches_a_policy(admin_api, policy):
    response = admin_api.patch(f"/api/v1/policies/{policy.pk}", {"auto_compact_token_limit": 12000, "strategy": "local"}, format="json")
    assert response.status_code == 200
    policy.refresh_from_db()
    assert (policy.auto_compact_token_limit, policy.strategy) == (12000, "local")


@pytest.mark.parametrize("field", ["auto_compact_token_limit", "user_message_budget", "retained_message_budget"])
def test_negative_budgets_are_refused(admin_api, policy, field):
    response = admin_api.patch(f"/api/v1/policies/{policy.pk}", {field: -1}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(f"{field}:")


def test_setting_both_compact_prompt_and_a_stored_prompt_is_refused(admin_api, policy):
    prompt = Prompt.objects.create(name="short", text="Summarise briefly.")
    response = admin_api.patch(f"/api/v1/policies/{policy.pk}", {"compact_prompt": "Mine", "prompt": prompt.pk}, format="json")
    assert response.status_code == 400
    assert "not both" in response.json()["error"]["message"]
    policy.refresh_from_db()
    assert (policy.compact_prompt, policy.prompt_id) == ("", None)


def test_setting_a_prompt_when_compact_prompt_is_already_stored_is_refused(admin_api, policy):
    policy.compact_prompt = "Mine"
    policy.save()
    prompt = Prompt.objects.create(name="short", text="Summarise briefly.")
    response = admin_api.patch(f"/api/v1/policies/{policy.pk}", {"prompt": prompt.pk}, format="json")
    assert response.status_code == 400


def test_policy_defaults_follow_codex(admin_api):
    data = admin_api.post("/api/v1/policies", {"name": "fresh"}, format="json").json()
    assert data["user_message_budget"] == 20000 and data["retained_message_budget"] == 64000
    assert data["auto_compact_token_limit"] is None and data["auto_compact_scope"] == "total"
    assert data["strategy"] == "auto" and data["remote_compaction_v2"] is True
    assert CompactionPolicy.objects.get(name="fresh").token_counter == "provider_encoding"


def test_an_upper_case_scheme_is_an_http_url_from_saving_to_sending(admin_api, operator_api, policy, items_factory,
                                                                   no_engine_sleeps):
    """Issue 27: `HTTP://` passed the outbound check when saved, then every use was refused as an invalid provider; a URL's
    scheme is case-insensitive, so it is used as the http URL it is (here: a host that does not resolve)."""
    body = {"name": "shouty", "base_url": "HTTP://api.example.invalid/v1", "model": "gpt-x", "remote_compaction": "v2",
            "request_max_retries": 0, "stream_max_retries": 0}
    created = admin_api.post("/api/v1/providers", body, format="json")
    assert created.status_code == 201, created.content
    session = operator_api.post("/api/v1/sessions", {
        "title": "t", "provider": created.json()["id"], "policy": policy.pk,
        "items": [items_factory.user("hello")]}, format="json")
    assert session.status_code == 201, session.content
    compacted = operator_api.post(f"/api/v1/sessions/{session.json()['id']}/compact?wait=true",
                                  {"method": "remote_v2"}, format="json")
    assert compacted.status_code == 502, compacted.content
    assert "base_url must be" not in compacted.content.decode()


def test_an_upper_case_webhook_scheme_is_an_http_url():
    from compaction_app.engine.hooks import HookSpec

    assert HookSpec(name="h", event="pre_compact", kind="webhook", target="HTTPS://hooks.example.invalid/x").target
