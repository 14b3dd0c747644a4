"""Remote v2 with a compaction_trigger through run_compaction (spec §4.3, §5.4)."""

from __future__ import annotations

import copy

import pytest

from compaction_app.engine.compactor import CompactionRequest
from compaction_app.engine.events import Error, StreamError
from compaction_app.engine.provider_errors import ErrorKind
from tests.compaction_app.engine.fakes import (
    HISTORY,
    INITIAL_CONTEXT,
    OLD_SUMMARY,
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
)

COMPACTION = {"type": "compaction", "encrypted_content": "ENC", "id": "cmp_1"}
V2 = dict(remote_compaction="v2", remote_compaction_v2=True)
PRE_TURN = CompactionRequest(trigger="auto", phase="pre_turn")


def ok_stream():
    return [done(assistant("ignored")), done(COMPACTION), completed(input_tokens=4_321, output_tokens=77, cached=1_000)]


def test_v2_request_ends_with_the_compaction_trigger():
    client = FakeClient(streams=[ok_stream()])
    tools = ({"type": "function", "name": "shell"},)
    run(snapshot=make_snapshot(), settings=make_settings(**V2, tools=tools, parallel_tool_calls=True,
                                                          reasoning={"effort": "low"}),
        request=PRE_TURN, client=client)
    assert client.requests == [("responses", {
        "model": "gpt-test", "instructions": "BASE", "input": [*HISTORY, {"type": "compaction_trigger"}],
        "tools": list(tools), "tool_choice": "auto", "parallel_tool_calls": True, "reasoning": {"effort": "low"},
        "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
        "client_metadata": {"x-codex-window-id": "thread-1:3"}})]


def test_v2_retains_user_messages_of_the_request_and_puts_the_compaction_last():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2), request=PRE_TURN,
                  client=FakeClient(streams=[ok_stream()]))
    assert outcome.replacement_history == [msg("user", "fix the bug"), OLD_SUMMARY, msg("user", "and add tests"),
                                           COMPACTION]
    assert outcome.output_items == [COMPACTION] and outcome.message == ""


def test_v2_mid_turn_injects_context_before_last_real_user_message():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2),
                  request=CompactionRequest(trigger="auto", phase="mid_turn"),
                  client=FakeClient(streams=[ok_stream()]))
    assert outcome.replacement_history == [msg("user", "fix the bug"), OLD_SUMMARY, *INITIAL_CONTEXT,
                                           msg("user", "and add tests"), COMPACTION]


def test_v2_retained_message_budget_setting_applies():
    outcome = run(snapshot=make_snapshot([msg("user", "old-old"), msg("user", "middle1234"), msg("user", "new")]),
                  settings=make_settings(**V2, retained_message_budget=3), request=PRE_TURN,
                  client=FakeClient(streams=[ok_stream()]))
    assert outcome.replacement_history == [msg("user", "midd…1 tokens truncated…1234"), msg("user", "new"),
                                           COMPACTION]


def test_v2_analytics_come_from_usage():
    image_msg = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": "data:image/png;base64,AA"}]}
    outcome = run(snapshot=make_snapshot([image_msg]), settings=make_settings(**V2), request=PRE_TURN,
                  client=FakeClient(streams=[ok_stream()]))
    record = outcome.attempts[0]
    assert (record.active_context_tokens_before, record.compaction_summary_tokens, record.cached_input_tokens,
            record.retained_image_count, record.implementation) == (4_321, 77, 1_000, 1, "responses_compaction_v2")


@pytest.mark.parametrize("stream,count,total", [
    ([done(assistant("no compaction")), completed()], 0, 1),
    ([done(COMPACTION), done(COMPACTION), completed()], 2, 2),
])
def test_v2_wrong_number_of_compaction_items_is_fatal_and_not_retried(stream, count, total):
    client = FakeClient(streams=[stream])
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    outcome = run(snapshot=snapshot, settings=make_settings(**V2), request=PRE_TURN, client=client)
    message = (f"remote compaction v2 expected exactly one compaction output item, got {count} from {total} "
               f"output items")
    assert len(client.bodies) == 1
    assert outcome.error.kind == "fatal" and outcome.error.message == message
    assert outcome.events[-1] == Error(message=f"Error running remote compact task: {message}",
                                       codex_error_info="fatal")
    assert snapshot == before and outcome.window == snapshot.window


def test_v2_retries_at_most_twice_first_immediately_then_with_backoff():
    failures = [error(ErrorKind.SERVER_OVERLOADED, "overloaded", 503)] * 3
    client = FakeClient(streams=failures)
    recorder = Recorder()
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2, stream_max_retries=5), request=PRE_TURN,
                  client=client, recorder=recorder)
    assert len(client.bodies) == 3
    assert recorder.sleeps == [0.0, 0.4]
    assert [e.message for e in outcome.events if isinstance(e, StreamError)] == [
        "Reconnecting... 1/2", "Reconnecting... 2/2"]
    assert outcome.events[-1].message == "Error running remote compact task: overloaded"
    assert outcome.attempts[0].retries == 2


def test_v2_retries_follow_a_smaller_provider_setting():
    client = FakeClient(streams=[error(ErrorKind.TRANSPORT, "reset")] * 2)
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2, stream_max_retries=1), request=PRE_TURN,
                  client=client)
    assert len(client.bodies) == 2
    assert [e.message for e in outcome.events if isinstance(e, StreamError)] == ["Reconnecting... 1/1"]


def test_v2_uses_the_servers_retry_after_when_given():
    client = FakeClient(streams=[error(ErrorKind.SERVER_OVERLOADED, retry_after=1.5),
                                 error(ErrorKind.SERVER_OVERLOADED, retry_after=2.5), ok_stream()])
    recorder = Recorder()
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2), request=PRE_TURN, client=client,
                  recorder=recorder)
    assert outcome.ok and recorder.sleeps == [1.5, 2.5]


def test_v2_stream_closed_before_completed_is_retried_then_succeeds():
    client = FakeClient(streams=[[done(COMPACTION)], ok_stream()])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2), request=PRE_TURN, client=client)
    assert outcome.ok and len(client.bodies) == 2
    (stream_error,) = [e for e in outcome.events if isinstance(e, StreamError)]
    assert stream_error.additional_details == "remote compaction v2 stream closed before response.completed"
    assert event_types(outcome) == ["item_started", "stream_error", "token_count", "item_completed",
                                    "context_compacted"]


def test_v2_non_retryable_error_fails_at_once():
    client = FakeClient(streams=[error(ErrorKind.INVALID_REQUEST, "bad input", 400)])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2), request=PRE_TURN, client=client)
    assert len(client.bodies) == 1 and outcome.error.http_status == 400


def test_v2_fallback_uses_the_current_model_on_invalid_request():
    client = FakeClient(streams=[error(ErrorKind.INVALID_REQUEST, "old model refused", 400), ok_stream()])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V2, model="old"),
                  fallback_settings=make_settings(**V2, model="new"),
                  request=CompactionRequest(trigger="auto", phase="pre_turn", reason="comp_hash_changed"),
                  client=client)
    assert [b["model"] for b in client.bodies] == ["old", "new"]
    assert outcome.ok and outcome.model_fallback["outcome"] == "succeeded"


def test_v2_compaction_item_without_string_encrypted_content_is_a_bad_response():
    client = FakeClient(streams=[[done({"type": "compaction", "encrypted_content": 7}), completed()]])
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    outcome = run(snapshot=snapshot, settings=make_settings(**V2), request=PRE_TURN, client=client)
    assert outcome.error.kind == "bad_response"
    assert outcome.error.message.startswith("invalid type: integer `7`, expected a string")
    assert len(client.bodies) == 1
    assert snapshot == before and outcome.window == snapshot.window
