"""ProviderConfig: validation, defaults, and a key that lives only in the environment."""

from __future__ import annotations

import pytest

from compaction_app.providers.config import ProviderConfig


def test_defaults_follow_the_spec():
    config = ProviderConfig(name="p", model="m")
    assert (config.base_url, config.wire_api, config.remote_compaction) == ("embedded", "responses", "none")
    assert (config.stream_max_retries, config.request_max_retries) == (5, 4)
    assert config.effective_context_window_percent == 95 and config.is_embedded


@pytest.mark.parametrize("field, value, fragment", [
    ("base_url", "ftp://x", "base_url"),
    ("wire_api", "grpc", "wire_api"),
    ("remote_compaction", "v3", "remote_compaction"),
    ("context_window", 0, "context_window"),
    ("effective_context_window_percent", 101, "effective_context_window_percent"),
    ("stream_max_retries", 101, "stream_max_retries"),
    ("request_max_retries", -1, "request_max_retries"),
    ("read_timeout", 0, "timeouts"),
])
def test_invalid_values_are_refused_with_a_clear_message(field, value, fragment):
    with pytest.raises(ValueError, match=fragment):
        ProviderConfig(name="p", model="m", **{field: value})


def test_api_key_is_read_from_the_named_variable_and_never_in_repr(monkeypatch):
    monkeypatch.setenv("CW_TEST_KEY", "sk-secret-123")
    config = ProviderConfig(name="p", model="m", api_key_env="CW_TEST_KEY")
    assert config.api_key() == "sk-secret-123"
    assert "sk-secret-123" not in repr(config)
    monkeypatch.delenv("CW_TEST_KEY")
    assert config.api_key() is None
    assert ProviderConfig(name="p", model="m").api_key() is None


def test_from_mapping_ignores_unknown_fields():
    config = ProviderConfig.from_mapping({"name": "p", "model": "m", "id": 3, "extra_headers": None,
                                          "wire_api": "chat"})
    assert config.wire_api == "chat" and config.extra_headers == {}
