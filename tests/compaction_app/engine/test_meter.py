"""The incremental window meter follows spec §3.2 / §3.4 and equals Codex's on-demand scan."""

from hypothesis import given
from hypothesis import strategies as st

from compaction_app.engine import meter as m
from compaction_app.engine.items import is_user_turn_boundary

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]}
CONTEXT_USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]}
ASSISTANT = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}
DEVELOPER = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "d"}]}
CALL = {"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c", "output": "ok"}
REASONING = {"type": "reasoning", "summary": [], "encrypted_content": "xyz"}
PLAIN_REASONING = {"type": "reasoning", "summary": []}


def append(state, item, tokens):
    return m.item_appended(state, tokens, m.item_flags(item))


def codex_scan(items, counts, usage_total, reasoning_included=False):
    """Codex's on-demand formula (spec §3.2), written as the scan it is, for comparison."""
    model_idx = [i for i, it in enumerate(items) if m.item_flags(it).model_generated]
    after_model = sum(counts[model_idx[-1] + 1 :]) if model_idx else 0
    user_idx = [i for i, it in enumerate(items) if is_user_turn_boundary(it)]
    reasoning = 0
    if user_idx and not reasoning_included:
        reasoning = sum(c for it, c in zip(items[: user_idx[-1]], counts, strict=False) if m.item_flags(it).encrypted_reasoning)
    return usage_total + after_model + reasoning


def test_total_is_last_usage_plus_items_after_the_last_model_generated_item():
    state = m.MeterState()
    for item, tokens in [(USER, 10), (CALL, 7), (OUTPUT, 30)]:
        state = append(state, item, tokens)
    state = m.usage_observed(state, total_tokens=100, input_tokens=90)
    assert m.active_total(state) == 100 + 30
    state = append(state, DEVELOPER, 5)
    assert m.active_total(state) == 135


def test_a_model_generated_item_restarts_the_items_since_count():
    state = m.usage_observed(m.MeterState(), total_tokens=50)
    state = append(state, OUTPUT, 40)
    assert m.active_total(state) == 90
    state = append(state, ASSISTANT, 12)
    assert m.active_total(state) == 50


def test_encrypted_reasoning_before_the_last_user_message_is_added_unless_the_server_included_it():
    state = m.MeterState()
    state = append(state, USER, 3)
    state = append(state, REASONING, 20)
    state = append(state, PLAIN_REASONING, 8)  # not encrypted: not part of the rule
    state = append(state, ASSISTANT, 4)
    state = m.usage_observed(state, total_tokens=100)
    assert m.active_total(state) == 100  # the reasoning is after the last user message
    state = append(state, USER, 6)
    assert m.active_total(state) == 100 + 6 + 20
    included = m.usage_observed(state, total_tokens=100, reasoning_included=True)
    assert m.active_total(included) == 100 + 6


def test_the_reasoning_rule_anchors_on_the_last_user_turn_boundary_not_on_contextual_user_messages():
    # Current Codex: encrypted reasoning counts when it lies before the last *user-turn boundary*; an injected
    # context message (or a legacy warning) after it does not move that anchor.
    state = append(append(m.MeterState(), REASONING, 20), CONTEXT_USER, 1)
    assert state.reasoning_before_user == 0
    assert append(state, USER, 1).reasoning_before_user == 20


def test_history_replacement_recomputes_from_the_new_items_and_resets_the_meter():
    state = m.MeterState(base_tokens=11)
    for item, tokens in [(USER, 10), (ASSISTANT, 20), (OUTPUT, 30)]:
        state = append(state, item, tokens)
    state = m.usage_observed(state, total_tokens=500, input_tokens=400, reasoning_included=True)
    replaced = m.history_replaced(state, [(7, m.item_flags(USER)), (9, m.item_flags(USER))])
    # spec §3.2: after a compaction the base is the estimate of the new history (base instructions included).
    assert replaced.usage_total == 11 + 7 + 9
    assert m.active_total(replaced) == 27
    assert replaced.since_model == 0
    assert replaced.reasoning_included is False
    assert replaced.history_tokens == 16


def test_history_replacement_keeps_the_reasoning_rule_for_the_new_history():
    replaced = m.history_replaced(
        m.MeterState(), [(20, m.item_flags(REASONING)), (5, m.item_flags(USER)), (3, m.item_flags(REASONING))]
    )
    assert replaced.reasoning_before_user == 20
    assert replaced.reasoning_after_user == 3
    assert m.active_total(replaced) == 28 + 20


def test_prefill_is_the_first_server_input_of_the_window_and_sticks():
    state = m.usage_observed(m.MeterState(), total_tokens=120, input_tokens=100)
    state = m.usage_observed(state, total_tokens=300, input_tokens=250)
    assert (state.prefill, state.prefill_source) == (100, m.PREFILL_SERVER)


def test_prefill_after_a_replacement_is_the_estimate_until_the_server_reports():
    state = m.usage_observed(m.MeterState(), total_tokens=120, input_tokens=100)
    state = m.history_replaced(state, [(40, m.item_flags(USER))])
    assert (state.prefill, state.prefill_source) == (40, m.PREFILL_ESTIMATED)
    state = m.usage_observed(state, total_tokens=90, input_tokens=70)
    assert (state.prefill, state.prefill_source) == (70, m.PREFILL_SERVER)


def test_a_new_window_without_replacement_clears_the_prefill():
    state = m.prefill_cleared(m.usage_observed(m.MeterState(), total_tokens=10, input_tokens=8))
    assert state.prefill is None


def test_context_window_exceeded_pins_the_usage_to_the_usable_window():
    state = m.pinned_full(append(m.MeterState(), ASSISTANT, 10), usable_window=30400)
    assert m.active_total(state) == 30400


ITEMS = st.sampled_from([USER, CONTEXT_USER, ASSISTANT, DEVELOPER, CALL, OUTPUT, REASONING, PLAIN_REASONING])


@given(st.lists(st.tuples(ITEMS, st.integers(0, 500)), max_size=40), st.integers(0, 10_000), st.booleans())
def test_incremental_meter_equals_codex_scan_once_the_model_has_spoken(pairs, usage, included):
    items = [ASSISTANT] + [p[0] for p in pairs]
    counts = [3] + [p[1] for p in pairs]
    state = m.MeterState()
    for item, tokens in zip(items, counts, strict=True):
        state = append(state, item, tokens)
    state = m.usage_observed(state, total_tokens=usage, reasoning_included=included)
    assert m.active_total(state) == codex_scan(items, counts, usage, included)
    assert state.history_tokens == sum(counts)


@given(st.lists(st.tuples(ITEMS, st.integers(0, 500)), max_size=40))
def test_replacement_equals_appending_the_same_items_after_a_recompute(pairs):
    flags = [(t, m.item_flags(i)) for i, t in pairs]
    replaced = m.history_replaced(m.MeterState(base_tokens=5), flags)
    appended = m.MeterState(base_tokens=5)
    for item, tokens in pairs:
        appended = append(appended, item, tokens)
    assert replaced == m.recomputed(appended)


def test_a_negative_server_usage_counts_as_zero():
    state = m.usage_observed(m.MeterState(since_model=7), total_tokens=-500)
    assert state.usage_total == 0
    assert m.active_total(state) == 7
