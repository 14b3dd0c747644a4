"""Local summarization through run_compaction (spec §4.1, §6.1, §6.2, §11)."""

from __future__ import annotations

import copy

from compaction_app.engine.compactor import CompactionRequest
from compaction_app.engine.events import Error, StreamError, TokenCount, Warning
from compaction_app.engine.items import user_message
from compaction_app.engine.prompts import (
    CONTEXT_WINDOW_EXCEEDED_MESSAGE,
    HEADS_UP_WARNING,
    SUMMARIZATION_PROMPT,
)
from compaction_app.engine.provider_errors import ErrorKind
from tests.compaction_app.engine.fakes import (
    CALL,
    HISTORY,
    INITIAL_CONTEXT,
    OUTPUT,
    REASONING,
    FakeClient,
    Recorder,
    assistant,
    completed,
    done,
    error,
    event_types,
    make_settings,
    make_snapshot,
    msg,
    run,
    summary,
)

MANUAL = CompactionRequest(trigger="manual")
PRE_TURN = CompactionRequest(trigger="auto", phase="pre_turn")
MID_TURN = CompactionRequest(trigger="auto", phase="mid_turn")


def ok_stream(text: str = "the summary"):
    return [done(assistant(text)), completed(900, 40)]


def test_local_request_is_the_history_plus_prompt_with_no_tools():
    client = FakeClient(streams=[ok_stream()])
    run(snapshot=make_snapshot(), settings=make_settings(tools=({"type": "function", "name": "shell"},),
                                                          parallel_tool_calls=True, prompt_cache_key="pck"),
        request=MANUAL, client=client)
    assert client.bodies == [{
        "model": "gpt-test",
        "instructions": "BASE",
        "input": [*HISTORY, user_message(SUMMARIZATION_PROMPT)],
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": None,
        "store": False,
        "stream": True,
        "include": [],
        "prompt_cache_key": "pck",
        "client_metadata": {"x-codex-window-id": "thread-1:3"},
    }]


def test_local_replacement_is_real_user_messages_then_prefixed_summary():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=MANUAL,
                  client=FakeClient(streams=[ok_stream()]))
    assert outcome.ok
    assert outcome.replacement_history == [msg("user", "fix the bug"), msg("user", "and add tests"),
                                           summary("the summary")]
    assert outcome.message == summary("the summary")["content"][0]["text"]
    assert outcome.summary_text == "the summary"
    assert outcome.reference_context_set is False


def test_mid_turn_local_injects_context_before_last_user_message():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=MID_TURN,
                  client=FakeClient(streams=[ok_stream()]))
    assert outcome.replacement_history == [msg("user", "fix the bug"), *INITIAL_CONTEXT,
                                           msg("user", "and add tests"), summary("the summary")]
    assert outcome.reference_context_set is True


def test_local_summariser_output_is_returned_but_not_part_of_the_replacement():
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]}
    client = FakeClient(streams=[[done(reasoning), done(assistant("S")), completed()]])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=MANUAL, client=client)
    assert outcome.output_items == [reasoning, assistant("S")]
    assert reasoning not in outcome.replacement_history


def test_summary_concatenates_output_text_parts_of_newest_assistant_message():
    reply = {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "part one, "}, {"type": "output_text", "text": "part two"}]}
    client = FakeClient(streams=[[done(assistant("older")), done(reply), completed()]])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=MANUAL, client=client)
    assert outcome.replacement_history[-1] == summary("part one, part two")


def test_summary_falls_back_to_newest_earlier_assistant_message_when_summariser_wrote_none():
    client = FakeClient(streams=[[done(REASONING), completed()]])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=MANUAL, client=client)
    assert outcome.replacement_history[-1] == summary("looking")


def test_summary_is_empty_suffix_when_no_assistant_text_exists_anywhere():
    client = FakeClient(streams=[[completed()]])
    outcome = run(snapshot=make_snapshot([msg("user", "hi")]), settings=make_settings(), request=MANUAL,
                  client=client)
    assert outcome.replacement_history == [msg("user", "hi"), summary("")]


def test_manual_local_runs_with_no_prior_user_message():
    client = FakeClient(streams=[ok_stream()])
    outcome = run(snapshot=make_snapshot([]), settings=make_settings(), request=MANUAL, client=client)
    assert outcome.replacement_history == [summary("the summary")]
    assert client.bodies[0]["input"] == [user_message(SUMMARIZATION_PROMPT)]


def test_configured_compact_prompt_replaces_the_default_prompt():
    client = FakeClient(streams=[ok_stream()])
    run(snapshot=make_snapshot([]), settings=make_settings(compact_prompt="Summarise tersely."), request=MANUAL,
        client=client)
    assert client.bodies[0]["input"] == [user_message("Summarise tersely.")]


def test_extra_instructions_are_appended_to_the_local_prompt():
    client = FakeClient(streams=[ok_stream()])
    request = CompactionRequest(trigger="manual", extra_instructions="  Keep the file list.  ")
    run(snapshot=make_snapshot([]), settings=make_settings(compact_prompt="P\n"), request=request, client=client)
    assert client.bodies[0]["input"] == [user_message("P\n\nKeep the file list.")]


def test_user_message_budget_setting_limits_kept_user_messages():
    client = FakeClient(streams=[ok_stream()])
    items = [msg("user", "a" * 40), msg("user", "middle1234")]
    outcome = run(snapshot=make_snapshot(items), settings=make_settings(user_message_budget=2), request=MANUAL,
                  client=client)
    assert outcome.replacement_history == [msg("user", "midd…1 tokens truncated…1234"), summary("the summary")]


def test_manual_local_event_order():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=MANUAL,
                  client=FakeClient(streams=[ok_stream()]))
    assert event_types(outcome) == ["turn_started", "item_started", "raw_response_item", "token_count",
                                    "token_count", "item_completed", "context_compacted", "warning",
                                    "turn_complete"]
    server, estimate = [e for e in outcome.events if isinstance(e, TokenCount)]
    assert (server.source, server.total_tokens) == ("server", 940)
    assert (estimate.source, estimate.total_tokens) == ("estimate", outcome.tokens_after)
    assert [e for e in outcome.events if isinstance(e, Warning)] == [Warning(message=HEADS_UP_WARNING)]
    assert outcome.events[1].item_id == outcome.events[5].item_id == "item-1"


def test_auto_local_has_no_turn_events():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=PRE_TURN,
                  client=FakeClient(streams=[ok_stream()]))
    assert event_types(outcome) == ["item_started", "raw_response_item", "token_count", "token_count",
                                    "item_completed", "context_compacted", "warning"]


def test_successful_local_compaction_advances_the_window_and_measures_tokens():
    settings = make_settings()
    outcome = run(snapshot=make_snapshot(), settings=settings, request=MANUAL,
                  client=FakeClient(streams=[ok_stream()]))
    assert (outcome.window.number, outcome.window.window_id, outcome.window.previous_window_id,
            outcome.window.first_window_id) == (4, "window-1", "w3", "w0")
    from compaction_app.engine.tokens import approx_token_count, estimate_item_tokens
    assert outcome.tokens_after == approx_token_count("BASE") + sum(
        estimate_item_tokens(i) for i in outcome.replacement_history)
    assert outcome.tokens_before == 5_000
    assert outcome.compacted_item() == {
        "message": outcome.message, "replacement_history": outcome.replacement_history,
        "window_number": 4, "first_window_id": "w0", "previous_window_id": "w3", "window_id": "window-1"}


def test_local_analytics_record_counts_the_summarisers_output_tokens_as_summary_tokens():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=MANUAL,
                  client=FakeClient(streams=[ok_stream()]))
    (record,) = outcome.attempts
    assert record.to_dict() | {"duration_ms": None} == {
        "thread_id": "thread-1", "turn_id": "turn-1", "trigger": "manual", "reason": "user_requested",
        "implementation": "responses", "phase": "standalone_turn", "strategy": "memento", "status": "completed",
        "error_kind": None, "http_status": None, "error_message": None, "active_context_tokens_before": 5_000,
        "active_context_tokens_after": outcome.tokens_after, "retained_image_count": None,
        "compaction_summary_tokens": 40, "cached_input_tokens": None, "started_at": 1_000.0,
        "completed_at": 1_000.0, "duration_ms": None, "retries": 0, "model": "gpt-test", "model_fallback": False}
    assert record.duration_ms == 500


# --- §6.1 context window exceeded ----------------------------------------------------------------------------

def test_context_window_exceeded_drops_oldest_item_with_its_partner_and_retries():
    items = [CALL, msg("user", "a"), OUTPUT, msg("user", "b")]
    cwe = error(ErrorKind.CONTEXT_WINDOW_EXCEEDED, "context_length_exceeded", 400)
    client = FakeClient(streams=[cwe, cwe, ok_stream()])
    outcome = run(snapshot=make_snapshot(items), settings=make_settings(), request=PRE_TURN, client=client)
    prompt = user_message(SUMMARIZATION_PROMPT)
    assert [b["input"] for b in client.bodies] == [
        [CALL, msg("user", "a"), OUTPUT, msg("user", "b"), prompt],
        [msg("user", "a"), msg("user", "b"), prompt],
        [msg("user", "b"), prompt],
    ]
    # Trimmed items are still collected from the untouched history.
    assert outcome.replacement_history == [msg("user", "a"), msg("user", "b"), summary("the summary")]


def test_context_window_exceeded_resets_the_retry_counter():
    cwe = error(ErrorKind.CONTEXT_WINDOW_EXCEEDED)
    overloaded = error(ErrorKind.SERVER_OVERLOADED)
    client = FakeClient(streams=[overloaded, cwe, overloaded, ok_stream()])
    recorder = Recorder()
    outcome = run(snapshot=make_snapshot([msg("user", "a"), msg("user", "b")]),
                  settings=make_settings(stream_max_retries=1), request=PRE_TURN, client=client,
                  recorder=recorder)
    assert outcome.ok
    assert [e.message for e in outcome.events if isinstance(e, StreamError)] == ["Reconnecting... 1/1"] * 2


def test_context_window_exceeded_with_one_item_left_fails_with_codex_message():
    snapshot = make_snapshot([])
    before = copy.deepcopy(snapshot)
    client = FakeClient(streams=[error(ErrorKind.CONTEXT_WINDOW_EXCEEDED, "too long", 400)])
    settings = make_settings()
    outcome = run(snapshot=snapshot, settings=settings, request=MANUAL, client=client)
    assert not outcome.ok
    assert outcome.error.kind == "context_window_exceeded"
    assert outcome.error.message == CONTEXT_WINDOW_EXCEEDED_MESSAGE == (
        "Codex ran out of room in the model's context window. Start a new thread or clear earlier history "
        "before retrying.")
    assert event_types(outcome) == ["turn_started", "item_started", "token_count", "error", "turn_complete"]
    full = outcome.events[2]
    assert (full.total_tokens, full.source) == (settings.usable_window, "full")
    assert outcome.events[3] == Error(message=CONTEXT_WINDOW_EXCEEDED_MESSAGE,
                                      codex_error_info="context_window_exceeded", http_status=400)
    assert outcome.window == snapshot.window and outcome.replacement_history is None
    assert outcome.attempts[0].active_context_tokens_after == settings.usable_window
    assert snapshot == before


def test_context_window_exceeded_trims_until_only_the_prompt_is_left_then_fails():
    cwe = error(ErrorKind.CONTEXT_WINDOW_EXCEEDED)
    client = FakeClient(streams=[cwe, cwe, cwe])
    snapshot = make_snapshot([msg("user", "a"), msg("user", "b")])
    before = copy.deepcopy(snapshot)
    outcome = run(snapshot=snapshot, settings=make_settings(), request=PRE_TURN, client=client)
    assert [len(b["input"]) for b in client.bodies] == [3, 2, 1]
    assert outcome.error.message == CONTEXT_WINDOW_EXCEEDED_MESSAGE
    assert snapshot == before


# --- §6.2 stream retries ---------------------------------------------------------------------------------------

def test_local_retries_with_backoff_then_fails_with_the_error_when_exhausted():
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    failures = [error(ErrorKind.SERVER_ERROR, "upstream 500", 500)] * 4
    client = FakeClient(streams=failures)
    recorder = Recorder()
    outcome = run(snapshot=snapshot, settings=make_settings(stream_max_retries=3), request=PRE_TURN,
                  client=client, recorder=recorder)
    assert len(client.bodies) == 4
    assert recorder.sleeps == [0.2, 0.4, 0.8]
    assert [e.message for e in outcome.events if isinstance(e, StreamError)] == [
        "Reconnecting... 1/3", "Reconnecting... 2/3", "Reconnecting... 3/3"]
    assert outcome.events[-1] == Error(message="upstream 500", codex_error_info="server_error", http_status=500)
    assert not outcome.ok and outcome.error.http_status == 500
    assert outcome.attempts[0].status == "failed" and outcome.attempts[0].retries == 3
    assert snapshot == before


def test_local_retries_a_stream_that_closes_before_completed():
    client = FakeClient(streams=[[done(assistant("partial"))], ok_stream()])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=PRE_TURN, client=client)
    assert outcome.ok and len(client.bodies) == 2
    (stream_error,) = [e for e in outcome.events if isinstance(e, StreamError)]
    assert stream_error.additional_details == "stream closed before response.completed"
    assert outcome.replacement_history[-1] == summary("the summary")
    assert outcome.output_items == [assistant("the summary")]


def test_local_retries_stop_at_the_cap_of_100():
    assert make_settings(stream_max_retries=500).stream_max_retries == 100


def test_local_request_strips_images_for_text_only_models():
    image_msg = {"type": "message", "role": "user", "content": [
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}
    client = FakeClient(streams=[ok_stream()])
    run(snapshot=make_snapshot([image_msg]), settings=make_settings(supports_images=False), request=MANUAL,
        client=client)
    assert client.bodies[0]["input"][0]["content"] == [
        {"type": "input_text", "text": "image content omitted because you do not support image input"}]

