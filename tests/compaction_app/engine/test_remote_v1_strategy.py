"""Remote v1 `/responses/compact` through run_compaction (spec §4.2, §5.2, §6.3, §6.4)."""

from __future__ import annotations

import copy

import pytest

from compaction_app.engine.compactor import CompactionRequest
from compaction_app.engine.errors import CompactionConfigError
from compaction_app.engine.events import Error
from compaction_app.engine.history import CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE
from compaction_app.engine.port import CompactResponse
from compaction_app.engine.provider_errors import ErrorKind
from compaction_app.engine.tokens import approx_token_count, estimate_item_tokens
from tests.compaction_app.engine.fakes import (
    CALL,
    DEV,
    ENV,
    HISTORY,
    INITIAL_CONTEXT,
    OUTPUT,
    FakeClient,
    assistant,
    error,
    event_types,
    make_settings,
    make_snapshot,
    msg,
    run,
)

COMPACTION = {"type": "compaction", "encrypted_content": "ENC"}
SERVER_OUTPUT = [DEV, ENV, msg("user", "fix the bug"), assistant("noted"), CALL, OUTPUT, COMPACTION]
V1 = dict(remote_compaction="v1")
PRE_TURN = CompactionRequest(trigger="auto", phase="pre_turn")


def test_v1_request_body_has_history_tools_and_instructions_but_no_prompt():
    client = FakeClient(compacts=[CompactResponse(output=SERVER_OUTPUT)])
    tools = ({"type": "function", "name": "shell", "parameters": {}},)
    run(snapshot=make_snapshot(), settings=make_settings(**V1, tools=tools, parallel_tool_calls=True,
                                                          reasoning={"effort": "high"}, prompt_cache_key="pck"),
        request=PRE_TURN, client=client)
    assert client.requests == [("compact", {
        "model": "gpt-test", "input": HISTORY, "instructions": "BASE", "tools": list(tools),
        "parallel_tool_calls": True, "reasoning": {"effort": "high"}, "prompt_cache_key": "pck"})]


def test_v1_keeps_filtered_output_for_pre_turn():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V1), request=PRE_TURN,
                  client=FakeClient(compacts=[CompactResponse(output=SERVER_OUTPUT)]))
    assert outcome.ok and outcome.message == ""
    assert outcome.replacement_history == [msg("user", "fix the bug"), assistant("noted"), COMPACTION]
    assert outcome.output_items == SERVER_OUTPUT
    assert event_types(outcome) == ["item_started", "token_count", "item_completed", "context_compacted"]


def test_v1_mid_turn_injects_context_before_last_user_message():
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V1),
                  request=CompactionRequest(trigger="auto", phase="mid_turn"),
                  client=FakeClient(compacts=[CompactResponse(output=SERVER_OUTPUT)]))
    assert outcome.replacement_history == [*INITIAL_CONTEXT, msg("user", "fix the bug"), assistant("noted"),
                                           COMPACTION]
    assert outcome.reference_context_set is True


def test_v1_trims_tool_outputs_before_the_call_and_adjusts_tokens_before():
    big_output = {"type": "function_call_output", "call_id": "c1", "output": "x" * 8000}
    items = [msg("user", "go"), CALL, big_output]
    item_tokens = [estimate_item_tokens(i) for i in items]
    window = approx_token_count("BASE") + sum(item_tokens) - 100
    # usable window = context window at 100 %.
    settings = make_settings(**V1, context_window=window, effective_percent=100)
    client = FakeClient(compacts=[CompactResponse(output=[COMPACTION])])
    outcome = run(snapshot=make_snapshot(items, active_tokens=3_000, item_tokens=item_tokens), settings=settings,
                  request=PRE_TURN, client=client)
    rewritten = {"type": "function_call_output", "call_id": "c1", "output": CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE}
    assert client.bodies[0]["input"] == [msg("user", "go"), CALL, rewritten]
    deleted = item_tokens[2] - estimate_item_tokens(rewritten)
    # Deleted tokens are capped by the tokens added after the last model-generated item (the output itself).
    assert outcome.attempts[0].active_context_tokens_before == 3_000 - min(deleted, item_tokens[2])


def test_v1_malformed_output_fails_with_serde_text_and_remote_error_prefix():
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    outcome = run(snapshot=snapshot, settings=make_settings(**V1), request=PRE_TURN,
                  client=FakeClient(compacts=[CompactResponse(output="not a list")]))
    assert not outcome.ok
    assert outcome.error.message == 'invalid type: string "not a list", expected a sequence'
    assert outcome.events[-1] == Error(
        message='Error running remote compact task: invalid type: string "not a list", expected a sequence',
        codex_error_info="bad_response")
    assert event_types(outcome) == ["item_started", "error"]
    assert snapshot == before and outcome.window == snapshot.window


def test_v1_provider_error_is_not_retried_by_the_engine():
    client = FakeClient(compacts=[error(ErrorKind.SERVER_ERROR, "502 from upstream", 502)])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V1), request=PRE_TURN, client=client)
    assert len(client.requests) == 1
    assert outcome.error.http_status == 502
    assert outcome.events[-1].message == "Error running remote compact task: 502 from upstream"
    assert outcome.attempts[0].to_dict()["status"] == "failed"
    assert outcome.attempts[0].error_kind == "server_error"


def test_manual_v1_failure_ends_the_standalone_turn_after_the_error():
    client = FakeClient(compacts=[error(ErrorKind.SERVER_ERROR)])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V1),
                  request=CompactionRequest(trigger="manual"), client=client)
    assert event_types(outcome) == ["turn_started", "item_started", "error", "turn_complete"]


# --- §6.4 previous-model fallback ----------------------------------------------------------------------------

DOWNSHIFT = CompactionRequest(trigger="auto", phase="pre_turn", reason="model_downshift")


def test_downshift_retries_with_the_current_model_on_invalid_request():
    client = FakeClient(compacts=[error(ErrorKind.INVALID_REQUEST, "bad model", 400),
                                  CompactResponse(output=[COMPACTION])])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V1, model="big-old"),
                  fallback_settings=make_settings(**V1, model="small-new", context_window=50_000),
                  request=DOWNSHIFT, client=client)
    assert [body["model"] for body in client.bodies] == ["big-old", "small-new"]
    assert outcome.ok and outcome.model == "small-new"
    assert outcome.model_fallback == {"reason": "model_downshift", "implementation": "responses_compact",
                                      "outcome": "succeeded"}
    assert outcome.attempts[0].model_fallback is True and outcome.attempts[0].model == "small-new"
    # The same compaction item id throughout.
    assert [e.item_id for e in outcome.events if e.type in ("item_started", "item_completed")] == ["item-1"] * 2


def test_failed_fallback_returns_the_original_error():
    client = FakeClient(compacts=[error(ErrorKind.INVALID_REQUEST, "first", 400),
                                  error(ErrorKind.SERVER_ERROR, "second", 500)])
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    outcome = run(snapshot=snapshot, settings=make_settings(**V1, model="old"),
                  fallback_settings=make_settings(**V1, model="new"),
                  request=CompactionRequest(trigger="auto", phase="pre_turn", reason="comp_hash_changed"),
                  client=client)
    assert outcome.error.message == "first" and outcome.error.http_status == 400
    assert outcome.model_fallback["outcome"] == "failed"
    assert snapshot == before


@pytest.mark.parametrize("kind,status", [(ErrorKind.SERVER_ERROR, 500), (ErrorKind.NOT_FOUND, 404)])
def test_fallback_only_follows_an_invalid_request(kind, status):
    client = FakeClient(compacts=[error(kind, "nope", status)])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V1, model="old"),
                  fallback_settings=make_settings(**V1, model="new"), request=DOWNSHIFT, client=client)
    assert len(client.requests) == 1 and not outcome.ok and outcome.model_fallback is None


def test_fallback_never_applies_to_a_context_limit_compaction():
    client = FakeClient(compacts=[error(ErrorKind.INVALID_REQUEST, "nope", 400)])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**V1, model="old"),
                  fallback_settings=make_settings(**V1, model="new"), request=PRE_TURN, client=client)
    assert len(client.requests) == 1 and not outcome.ok


def test_model_switch_reasons_are_only_for_automatic_pre_turn_compaction():
    with pytest.raises(CompactionConfigError):
        CompactionRequest(trigger="auto", phase="mid_turn", reason="model_downshift")
    with pytest.raises(CompactionConfigError):
        CompactionRequest(trigger="manual", reason="comp_hash_changed")


def test_extra_instructions_are_refused_for_remote_compaction():
    with pytest.raises(CompactionConfigError, match="local summarization only"):
        run(snapshot=make_snapshot(), settings=make_settings(**V1),
            request=CompactionRequest(trigger="manual", extra_instructions="keep files"),
            client=FakeClient())


@pytest.mark.parametrize("content,shown", [(5, "integer `5`"), (None, "null"), ({"k": 1}, "map")])
def test_v1_compaction_item_without_string_encrypted_content_is_a_bad_response(content, shown):
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    bad = {"type": "compaction", "encrypted_content": content}
    outcome = run(snapshot=snapshot, settings=make_settings(**V1), request=PRE_TURN,
                  client=FakeClient(compacts=[CompactResponse(output=[msg("user", "fix the bug"), bad])]))
    assert not outcome.ok
    assert outcome.error.kind == "bad_response"
    assert outcome.error.message.startswith(f"invalid type: {shown}, expected a string")
    assert snapshot == before and outcome.window == snapshot.window
