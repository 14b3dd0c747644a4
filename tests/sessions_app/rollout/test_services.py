"""Session services: creation opens window 0, appends count each item once, compactions open windows (spec §9),
and invalid items store nothing."""

import pytest

from compaction_app.engine.tokens import counter
from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout import selectors
from sessions_app.rollout.services import (
    append_rollout_line,
    do_append_items,
    do_create_session,
    do_record_usage,
    rebuild_projection,
    verify_projection,
)
from sessions_app.rollout.validation import ItemValidationError

ENV = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd=/x</environment_context>"}]}


def test_a_new_session_opens_window_zero_with_a_uuid7_thread_and_window_id(session):
    assert session.window_number == 0
    assert session.window_id == session.first_window_id
    assert session.previous_window_id == ""
    assert session.thread_id.version == 7
    assert session.meter_prefill is None  # spec §3.4: unknown until the first server usage
    assert session.window_id[14] == "7"  # the UUID version digit
    [window] = ContextWindow.objects.filter(session=session)
    assert (window.number, window.window_id, window.opened_by_seq, window.reason) == (0, session.window_id, None, "session_start")
    [meta] = RolloutLine.objects.filter(session=session)
    assert meta.kind == p.SESSION_META and meta.payload["id"] == str(session.thread_id)


def test_creation_records_initial_context_then_a_turn_context_then_items(make_session, items_factory):
    session = make_session(initial_context=[ENV], items=[items_factory.user("hi")])
    kinds = list(RolloutLine.objects.filter(session=session).values_list("kind", flat=True))
    assert kinds == [p.SESSION_META, p.RESPONSE_ITEM, p.TURN_CONTEXT, p.RESPONSE_ITEM]
    assert selectors.live_items(session=session) == [ENV, items_factory.user("hi")]
    assert session.reference_context_set is True
    assert session.initial_context == [ENV]


def test_each_item_is_counted_once_with_the_policy_counter_and_stored(session, items_factory):
    item = items_factory.user("count me exactly")
    line = do_append_items(session=session, items=[item]).lines[0]
    expected = counter("o200k_base").count_item(item)
    assert line.tokens == expected
    assert LiveItem.objects.get(session=session, source_seq=line.seq).tokens == expected


def test_the_codex_estimator_policy_counts_with_ceil_bytes_over_four(make_session, policy, items_factory):
    policy.token_counter = "codex_estimate"
    policy.save()
    session = make_session(items=[items_factory.user("hi")])
    line = RolloutLine.objects.get(session=session, kind=p.RESPONSE_ITEM)
    assert line.tokens == 20  # 78 bytes of JSON


def test_base_instructions_are_counted_into_the_starting_meter(make_session):
    session = make_session(base_instructions="You are a careful assistant.")
    expected = counter("o200k_base").count_text("You are a careful assistant.")
    assert session.meter_base_tokens == expected
    assert session.tokens_in_window == expected


def test_window_total_follows_usage_plus_items_after_the_last_model_item(session, items_factory):
    base = session.tokens_in_window
    do_append_items(session=session, items=[items_factory.user("question")], estimate_if_no_usage=False)
    user_tokens = RolloutLine.objects.filter(session=session).last().tokens
    assert session.tokens_in_window == base + user_tokens
    do_append_items(session=session, items=[items_factory.assistant("answer")], usage={"input_tokens": 900, "output_tokens": 100})
    assert session.tokens_in_window == 1000
    out = {"type": "function_call_output", "call_id": "c", "output": "file contents"}
    do_append_items(session=session, items=[out])
    assert session.tokens_in_window == 1000 + counter("o200k_base").count_item(out)


def test_model_output_without_usage_falls_back_to_the_estimate_of_the_whole_history(session, items_factory):
    do_append_items(session=session, items=[items_factory.user("q"), items_factory.assistant("a")])
    total = sum(LiveItem.objects.filter(session=session).values_list("tokens", flat=True))
    assert session.tokens_in_window == session.meter_base_tokens + total
    assert RolloutLine.objects.filter(session=session).last().payload["source"] == "estimate"


def test_a_compacted_line_opens_the_next_window_and_replaces_the_history(session, items_factory):
    do_append_items(session=session, items=[items_factory.user("one"), items_factory.assistant("two")])
    first = session.window_id
    replacement = [items_factory.user("one"), items_factory.user("summary")]
    line = append_rollout_line(session=session, kind=p.COMPACTED, payload={"message": "summary", "replacement_history": replacement})
    assert (session.window_number, session.previous_window_id, session.first_window_id) == (1, first, first)
    assert session.window_id not in ("", first)
    assert line.payload["window_id"] == session.window_id and line.payload["window_number"] == 1
    assert line.item_tokens == [counter("o200k_base").count_item(i) for i in replacement]
    assert selectors.live_items(session=session) == replacement
    assert session.compaction_count == 1
    assert session.reference_context_set is False
    window = ContextWindow.objects.get(session=session, number=1)
    assert (window.opened_by_seq, window.previous_window_id, window.reason) == (line.seq, first, "compacted")
    assert session.tokens_in_window == session.meter_base_tokens + sum(line.item_tokens)


def test_a_turn_context_after_a_compaction_marks_the_baseline_installed(session):
    append_rollout_line(session=session, kind=p.COMPACTED, payload={"replacement_history": []})
    append_rollout_line(session=session, kind=p.TURN_CONTEXT, payload={"turn_id": "t", "model": "sim-2"})
    assert session.reference_context_set is True
    assert session.model == "sim-2"


def test_usage_sets_the_window_prefill_once(session):
    do_record_usage(session=session, usage={"input_tokens": 700, "output_tokens": 50})
    do_record_usage(session=session, usage={"input_tokens": 900, "output_tokens": 50})
    assert (session.meter_prefill, session.tokens_in_window) == (700, 950)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("nope", "items: must be a list of items"),
        ([{"role": "user"}], "items[0].type: is required"),
        ([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": 5}]}], "items[0].content[0].text: must be a string"),
        ([{"type": "message", "role": "robot", "content": []}], "items[0].role: must be one of"),
        ([{"type": "function_call", "call_id": "c", "name": "f"}], "items[0].arguments: is required"),
        ([{"type": "compaction_trigger"}], "items[0].type: compaction_trigger is a request-only item"),
        ([{"type": "mystery"}], "items[0].type: unknown item type 'mystery'"),
        ([{"type": "function_call_output", "call_id": "c", "output": "a\x00b"}], "items[0].output: must not contain a NUL"),
    ],
)
def test_invalid_items_are_refused_and_nothing_is_stored(session, items_factory, items, message):
    if isinstance(items, list):
        items = [items_factory.user("fine"), items_factory.user("also fine"), *items]
        message = message.replace("items[0]", "items[2]")
    lines_before = list(RolloutLine.objects.filter(session=session).values_list("pk", flat=True))
    live_before = selectors.live_items(session=session)
    state_before = Session.objects.get(pk=session.pk).header
    with pytest.raises(ItemValidationError) as caught:
        do_append_items(session=session, items=items)
    assert str(caught.value).startswith(message)
    assert list(RolloutLine.objects.filter(session=session).values_list("pk", flat=True)) == lines_before
    assert selectors.live_items(session=session) == live_before
    assert Session.objects.get(pk=session.pk).header == state_before


def test_an_invalid_item_at_creation_creates_no_session(provider, policy, items_factory):
    with pytest.raises(ItemValidationError, match=r"initial_context\[0\]"):
        do_create_session(title="x", provider=provider, policy=policy, initial_context=[{"type": "message"}])
    assert not Session.objects.exists()


def test_rebuild_repairs_a_tampered_cache_and_verify_reports_it(session, items_factory):
    do_append_items(session=session, items=[items_factory.user("a"), items_factory.user("b")])
    LiveItem.objects.filter(session=session, position=1).update(item=items_factory.user("tampered"))
    assert verify_projection(session=session) != []
    rebuild_projection(session=session)
    assert verify_projection(session=session) == []
    assert selectors.live_items(session=session)[1] == items_factory.user("b")


def test_compaction_summary_alias_is_stored_as_compaction(session):
    do_append_items(session=session, items=[{"type": "compaction_summary", "encrypted_content": "abc"}])
    assert selectors.live_items(session=session)[-1]["type"] == "compaction"
