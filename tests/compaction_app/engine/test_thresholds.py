"""Thresholds (spec §2.2-§2.4)."""

from __future__ import annotations

import pytest

from compaction_app.engine.thresholds import (
    ModelLimits,
    auto_compact_limit,
    previous_model_reason,
    token_status,
    too_big_for_model,
    usable_window,
)
from compaction_app.engine.vocabulary import Reason, Scope


def test_usable_window_uses_integer_division_of_the_percent():
    assert usable_window(272_000, 95) == 258_400
    assert usable_window(101, 95) == 95
    assert usable_window(None, 95) is None


def test_usable_window_rejects_bad_percent_and_window():
    with pytest.raises(ValueError):
        usable_window(1000, 101)
    with pytest.raises(ValueError):
        usable_window(-1, 95)


def test_auto_limit_defaults_to_ninety_percent_of_the_window():
    assert auto_compact_limit(272_000) == 244_800


def test_auto_limit_clamps_a_configured_limit_to_ninety_percent():
    assert auto_compact_limit(272_000, 600_000) == 244_800
    assert auto_compact_limit(100, 200) == 90


def test_auto_limit_keeps_a_smaller_configured_limit():
    assert auto_compact_limit(272_000, 100_000) == 100_000


def test_auto_limit_without_a_window_is_the_configured_value():
    assert auto_compact_limit(None, 5000) == 5000
    assert auto_compact_limit(None, None) is None


def test_total_scope_reaches_the_limit_at_equality():
    below = token_status(active_tokens=244_799, context_window=272_000)
    at = token_status(active_tokens=244_800, context_window=272_000)
    assert (below.token_limit_reached, below.tokens_until_compaction) == (False, 1)
    assert (at.token_limit_reached, at.tokens_until_compaction) == (True, 0)
    assert at.scope_limit == 244_800 and at.scope_tokens == 244_800


def test_total_scope_has_no_usable_window_cap_in_tokens_until_compaction():
    # limit 1000 (configured), usable window 95: tokens_until ignores the window in the total scope.
    status = token_status(active_tokens=50, context_window=100_000, configured_limit=1000, effective_percent=95)
    assert status.tokens_until_compaction == 950


def test_total_scope_without_limit_never_triggers():
    status = token_status(active_tokens=10**9, context_window=None)
    assert status.token_limit_reached is False
    assert status.scope_limit is None and status.tokens_until_compaction is None


def test_body_scope_counts_tokens_after_the_prefill():
    status = token_status(active_tokens=30_000, context_window=272_000, configured_limit=20_000,
                          scope=Scope.BODY_AFTER_PREFIX, prefill=12_000)
    assert status.scope_tokens == 18_000
    assert status.token_limit_reached is False
    assert status.tokens_until_compaction == 2_000


def test_body_scope_first_check_without_prefill_counts_zero():
    status = token_status(active_tokens=30_000, context_window=272_000, configured_limit=20_000,
                          scope="body_after_prefix")
    assert status.scope_tokens == 0 and status.token_limit_reached is False


def test_body_scope_does_not_clamp_the_configured_limit():
    status = token_status(active_tokens=250_000, context_window=272_000, configured_limit=600_000,
                          scope=Scope.BODY_AFTER_PREFIX, prefill=0)
    assert status.scope_limit == 600_000
    assert status.token_limit_reached is False
    assert status.tokens_until_compaction == 258_400 - 250_000


def test_body_scope_hits_the_usable_window_hard_cap():
    status = token_status(active_tokens=258_400, context_window=272_000, configured_limit=600_000,
                          scope=Scope.BODY_AFTER_PREFIX, prefill=0)
    assert status.token_limit_reached is True and status.tokens_until_compaction == 0


def test_body_scope_reaches_at_equality_of_body_and_limit():
    status = token_status(active_tokens=21_000, context_window=272_000, configured_limit=20_000,
                          scope=Scope.BODY_AFTER_PREFIX, prefill=1_000)
    assert status.token_limit_reached is True


def test_body_scope_without_configured_limit_uses_the_auto_limit():
    status = token_status(active_tokens=244_800, context_window=272_000, scope=Scope.BODY_AFTER_PREFIX, prefill=0)
    assert status.scope_limit == 244_800 and status.token_limit_reached is True


BIG = ModelLimits("big", context_window=400_000)
SMALL = ModelLimits("small", context_window=272_000)


def test_downshift_total_scope_is_strictly_above_the_new_limit():
    assert too_big_for_model(244_800, SMALL) is False
    assert too_big_for_model(244_801, SMALL) is True


def test_downshift_body_scope_uses_only_the_new_usable_window():
    assert too_big_for_model(258_399, SMALL, Scope.BODY_AFTER_PREFIX) is False
    assert too_big_for_model(258_400, SMALL, Scope.BODY_AFTER_PREFIX) is True


def test_downshift_total_scope_also_triggers_at_the_usable_window_when_limit_is_higher():
    odd = ModelLimits("odd", context_window=1000, effective_percent=50)  # usable 500, limit 900
    assert too_big_for_model(500, odd) is True


def test_model_downshift_reason_when_switching_to_a_smaller_window_with_a_big_history():
    assert previous_model_reason(BIG, SMALL, 250_000) is Reason.MODEL_DOWNSHIFT
    assert previous_model_reason(BIG, SMALL, 100_000) is None
    assert previous_model_reason(SMALL, BIG, 250_000) is None
    assert previous_model_reason(None, SMALL, 250_000) is None


def test_same_model_is_never_a_downshift():
    assert previous_model_reason(SMALL, SMALL, 270_000) is None


def test_comp_hash_change_wins_over_downshift():
    prev = ModelLimits("big", context_window=400_000, comp_hash="h1")
    cur = ModelLimits("small", context_window=272_000, comp_hash="h2")
    assert previous_model_reason(prev, cur, 0) is Reason.COMP_HASH_CHANGED


def test_comp_hash_needs_both_models_to_declare_one():
    prev = ModelLimits("a", comp_hash="h1")
    cur = ModelLimits("b", comp_hash=None)
    assert previous_model_reason(prev, cur, 0) is None


def test_a_model_switch_to_an_equal_usable_window_is_no_downshift_even_when_the_history_is_too_big():
    previous = ModelLimits("big", context_window=100_000)
    same_window = ModelLimits("other", context_window=100_000)
    one_smaller = ModelLimits("other", context_window=99_999)
    assert too_big_for_model(99_000, same_window)
    assert previous_model_reason(previous, same_window, 99_000) is None
    assert previous_model_reason(previous, one_smaller, 99_000) is Reason.MODEL_DOWNSHIFT


def test_tokens_above_the_limit_reach_it_with_nothing_left_until_compaction():
    total = token_status(active_tokens=1_000, context_window=1_000)  # limit: 90% of the window
    assert (total.scope_limit, total.token_limit_reached, total.tokens_until_compaction) == (900, True, 0)
    body = token_status(active_tokens=2_000, context_window=10_000, configured_limit=500,
                        scope=Scope.BODY_AFTER_PREFIX, prefill=1_000)
    assert (body.scope_tokens, body.token_limit_reached, body.tokens_until_compaction) == (1_000, True, 0)


def test_the_downshift_size_test_is_strictly_above_the_new_limit():
    new_model = ModelLimits("small", context_window=1_000)  # limit 900, usable window 950
    assert not too_big_for_model(900, new_model)
    assert too_big_for_model(901, new_model)
