"""Strategy selection (spec §2.5)."""

from __future__ import annotations

import pytest

from compaction_app.engine.errors import CompactionConfigError
from compaction_app.engine.select import select_strategy
from compaction_app.engine.vocabulary import Strategy
from tests.compaction_app.engine.fakes import make_settings


@pytest.mark.parametrize("overrides,expected", [
    (dict(), Strategy.LOCAL),
    (dict(remote_compaction="v1"), Strategy.REMOTE_V1),
    (dict(remote_compaction="v2"), Strategy.REMOTE_V1),
    (dict(remote_compaction="v2", remote_compaction_v2=True), Strategy.REMOTE_V2),
    (dict(remote_compaction="v1", remote_compaction_v2=True), Strategy.REMOTE_V1),
    (dict(token_budget=True, remote_compaction="v2", remote_compaction_v2=True), Strategy.TOKEN_BUDGET),
    (dict(token_budget=True), Strategy.TOKEN_BUDGET),
])
def test_automatic_selection_follows_the_spec_order(overrides, expected):
    assert select_strategy(make_settings(**overrides)) is expected


def test_policy_preference_overrides_the_automatic_rule():
    assert select_strategy(make_settings(strategy="local", remote_compaction="v2")) is Strategy.LOCAL


def test_request_overrides_the_policy():
    settings = make_settings(strategy="local", remote_compaction="v2")
    assert select_strategy(settings, "remote_v2") is Strategy.REMOTE_V2
    assert select_strategy(settings, "token_budget") is Strategy.TOKEN_BUDGET


@pytest.mark.parametrize("support,requested", [("none", "remote_v1"), ("none", "remote_v2"), ("v1", "remote_v2")])
def test_remote_strategy_without_provider_support_is_a_clear_error(support, requested):
    with pytest.raises(CompactionConfigError, match="needs a provider"):
        select_strategy(make_settings(remote_compaction=support), requested)


def test_unknown_strategy_is_rejected():
    with pytest.raises(CompactionConfigError, match="unknown compaction strategy"):
        select_strategy(make_settings(), "magic")


def test_settings_reject_unknown_enum_values_and_negative_budgets():
    with pytest.raises(ValueError, match="scope must be one of"):
        make_settings(scope="everything")
    with pytest.raises(ValueError, match="token_counter"):
        make_settings(token_counter="words")
    with pytest.raises(ValueError):
        make_settings(user_message_budget=-1)
    with pytest.raises(ValueError):
        make_settings(model="")
