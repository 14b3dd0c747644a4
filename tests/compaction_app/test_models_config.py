"""Configuration models: validation in the admin path and the counter a policy selects."""

import pytest
from django.core.exceptions import ValidationError

from compaction_app.models import CompactionPolicy, Prompt, Provider


def test_policy_with_both_prompt_sources_fails_model_validation(db):
    prompt = Prompt.objects.create(name="p", text="t")
    policy = CompactionPolicy(name="both", compact_prompt="x", prompt=prompt)
    with pytest.raises(ValidationError, match="not both"):
        policy.full_clean()


def test_negative_budget_fails_model_validation(db):
    with pytest.raises(ValidationError, match="user_message_budget"):
        CompactionPolicy(name="neg", user_message_budget=-5).full_clean()


def test_policy_counter_name_follows_the_provider_encoding_or_codex_estimator(db):
    provider = Provider(name="p", base_url="embedded", model="m", encoding="cl100k_base")
    assert CompactionPolicy(name="a").counter_name(provider) == "cl100k_base"
    assert CompactionPolicy(name="b", token_counter="codex_estimate").counter_name(provider) == "codex_estimate"


def test_usable_window_is_integer_percent_of_the_window():
    assert Provider(context_window=272000, effective_context_window_percent=95).usable_context_window == 258400
    assert Provider(context_window=32001, effective_context_window_percent=95).usable_context_window == 30400
