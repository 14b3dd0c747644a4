"""Every strategy end to end through the service against the scripted fake provider served on 127.0.0.1: the exact
request bodies, the exact installed history, the rollout lines in the order of spec §8.1/§11, the rows, the
window advance (spec §9) and the meter after compaction (spec §3.2)."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.prompts import HEADS_UP_WARNING, SUMMARIZATION_PROMPT
from compaction_app.models import AuditEntry, Compaction, CompactionAttempt, CompactionPolicy, Provider
from sessions_app.compactions.services import do_compact_session
from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session
from sessions_app.rollout.services import do_create_session, verify_projection
from tests.fakes.scripted_provider import (
    Reply,
    ScriptedProvider,
    assistant,
    compaction,
    completed,
    created,
    output_item_done,
)

BASE = "You are a careful coding agent."
CTX = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>\nsandboxed\n</permissions instructions>"}]},
    user_message("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"),
]
U1 = user_message("fix the failing parser test")
A1 = assistant("Looking at the parser now.")
CALL = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\": \"pytest\"}"}
OUT = {"type": "function_call_output", "call_id": "c1", "output": "1 failed, 41 passed"}
U2 = user_message("also add a regression test")
A2 = assistant("Added tests/test_parser.py.")
BODY = [U1, A1, CALL, OUT, U2, A2]
COMPACTION_ITEM = compaction("ENC-1")


def summary(text: str) -> dict:
    return user_message(f"{SUMMARY_PREFIX}\n{text}")


@pytest.fixture
def scripted():
    provider = ScriptedProvider()
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


def make(scripted, *, remote: str = "none", token_budget: bool = False, **policy_fields) -> Session:
    provider = Provider.objects.create(
        name=f"scripted-{remote}-{token_budget}", base_url=scripted.base_url, model="gpt-test",
        context_window=100_000, remote_compaction=remote, stream_max_retries=2, request_max_retries=0,
    )
    policy = CompactionPolicy.objects.create(name=f"p-{remote}-{token_budget}", token_budget=token_budget,
                                             **policy_fields)
    return do_create_session(title="scripted", provider=provider, policy=policy, base_instructions=BASE,
                             initial_context=CTX, items=BODY)


def lines_after(session: Session, seq: int) -> list[RolloutLine]:
    return list(RolloutLine.objects.filter(session=session, seq__gt=seq).order_by("seq"))


def live(session: Session) -> list[dict]:
    return list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))


def responses_body(session: Session, input_items: list[dict]) -> dict:
    thread = str(session.thread_id)
    return {
        "model": "gpt-test", "instructions": BASE, "input": input_items, "tools": [], "tool_choice": "auto",
        "parallel_tool_calls": False, "reasoning": None, "store": False, "stream": True, "include": [],
        "prompt_cache_key": thread, "client_metadata": {"x-codex-window-id": f"{thread}:0"},
    }


def assert_installed(session: Session, before: Session, result: Compaction, expected_history: list[dict],
                     expected_kinds: list[tuple[str, str | None]]) -> None:
    session.refresh_from_db()
    assert live(session) == expected_history
    line_kinds = [(line.kind, line.payload.get("type") if line.kind == "event_msg" else None)
                  for line in lines_after(session, before.last_seq)]
    assert line_kinds == expected_kinds
    compacted = RolloutLine.objects.get(session=session, seq=result.rollout_seq)
    assert compacted.seq == before.last_seq + 1 and compacted.kind == "compacted"
    assert compacted.payload["replacement_history"] == expected_history
    # spec §9: the window advances only on success, with the previous id and the same first id.
    assert session.window_number == before.window_number + 1 == result.window_number
    assert session.previous_window_id == before.window_id == result.previous_window_id
    assert session.first_window_id == before.first_window_id == result.first_window_id
    assert session.window_id == result.window_id == compacted.payload["window_id"] != before.window_id
    assert ContextWindow.objects.filter(session=session, window_id=session.window_id,
                                        opened_by_seq=compacted.seq).exists()
    # spec §3.2: right after compaction the meter is the estimate of the new history (engine's tokens_after).
    estimate = next(line for line in lines_after(session, before.last_seq)
                    if line.payload.get("type") == "token_count")
    assert session.tokens_in_window == result.tokens_after == estimate.payload["info"]["last_token_usage"][
        "total_tokens"]
    assert result.tokens_before == before.tokens_in_window
    attempt = CompactionAttempt.objects.get(compaction=result)
    assert attempt.status == "completed" and attempt.tokens_after == result.tokens_after
    assert attempt.completed_at is not None and attempt.duration_ms is not None
    assert AuditEntry.objects.filter(action="compaction", compaction=result).count() == 1
    assert verify_projection(session=session) == []


@pytest.mark.django_db
def test_local_manual_compaction_sends_the_prompt_last_and_installs_user_messages_plus_summary(scripted):
    session = make(scripted)
    before = Session.objects.get(pk=session.pk)
    scripted.add(Reply.sse([created(), output_item_done(assistant("S: parser fixed, tests added")),
                            completed(input_tokens=900, output_tokens=12)]))
    result = do_compact_session(session_id=session.pk, strategy="local")
    (request,) = scripted.requests
    assert request.path == "/v1/responses"
    assert request.json == responses_body(session, [*CTX, *BODY, user_message(SUMMARIZATION_PROMPT)])
    assert_installed(session, before, result, [U1, U2, summary("S: parser fixed, tests added")], [
        ("compacted", None), ("event_msg", "compaction_usage"), ("event_msg", "token_count"), ("event_msg", "context_compacted"),
        ("event_msg", "warning"),
    ])
    warning = lines_after(session, before.last_seq)[-1]
    assert warning.payload["message"] == HEADS_UP_WARNING
    assert result.summary == "S: parser fixed, tests added"
    assert (result.trigger, result.reason, result.phase, result.implementation, result.strategy) == (
        "manual", "user_requested", "standalone_turn", "responses", "local")
    # DoNotInject (spec §5.3): the baseline is cleared, the next turn re-injects full context.
    assert session.reference_context_set is False


@pytest.mark.django_db
def test_local_mid_turn_injects_context_before_the_last_user_message_and_writes_turn_context(scripted):
    session = make(scripted)
    before = Session.objects.get(pk=session.pk)
    scripted.add(Reply.sse([created(), output_item_done(assistant("S")), completed()]))
    result = do_compact_session(session_id=session.pk, trigger="auto", phase="mid_turn", strategy="local",
                                turn_id="turn-7")
    assert_installed(session, before, result, [U1, *CTX, U2, summary("S")], [
        ("compacted", None), ("turn_context", None), ("event_msg", "token_count"),
        ("event_msg", "context_compacted"), ("event_msg", "warning"),
    ])
    turn_context = lines_after(session, before.last_seq)[1]
    assert turn_context.payload["turn_id"] == "turn-7"
    assert session.reference_context_set is True
    assert result.reason == "context_limit" and result.phase == "mid_turn"


@pytest.mark.django_db
def test_local_custom_prompt_from_the_policy_and_operator_instructions_are_sent(scripted):
    session = make(scripted, compact_prompt="Summarise tersely.")
    scripted.add(Reply.sse([created(), output_item_done(assistant("S")), completed()]))
    do_compact_session(session_id=session.pk, strategy="local", instructions="Keep file names.")
    assert scripted.requests[0].json["input"][-1] == user_message("Summarise tersely.\n\nKeep file names.")


@pytest.mark.django_db
def test_remote_v1_posts_to_responses_compact_and_keeps_filtered_output(scripted):
    session = make(scripted, remote="v1")
    before = Session.objects.get(pk=session.pk)
    stale = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "stale"}]}
    scripted.add(Reply.json(200, {"output": [stale, U1, assistant("noted"), COMPACTION_ITEM]}))
    result = do_compact_session(session_id=session.pk, strategy="remote_v1")
    (request,) = scripted.requests
    assert request.path == "/v1/responses/compact"
    assert request.json == {"model": "gpt-test", "input": [*CTX, *BODY], "instructions": BASE, "tools": [],
                            "parallel_tool_calls": False, "prompt_cache_key": str(session.thread_id)}
    assert_installed(session, before, result, [U1, assistant("noted"), COMPACTION_ITEM], [
        ("compacted", None), ("event_msg", "token_count"), ("event_msg", "context_compacted"),
    ])
    assert result.implementation == "responses_compact" and result.summary == ""


@pytest.mark.django_db
def test_remote_v2_sends_the_trigger_last_and_retains_user_messages_before_the_compaction_item(scripted):
    session = make(scripted, remote="v2", remote_compaction_v2=True)
    before = Session.objects.get(pk=session.pk)
    scripted.add(Reply.sse([created(), output_item_done(assistant("Compacting.")),
                            output_item_done(COMPACTION_ITEM, 1),
                            completed(input_tokens=700, output_tokens=40, cached_tokens=512)]))
    result = do_compact_session(session_id=session.pk)  # the policy's auto selection picks v2 (spec §2.5)
    (request,) = scripted.requests
    assert request.json == responses_body(session, [*CTX, *BODY, {"type": "compaction_trigger"}])
    assert_installed(session, before, result, [U1, U2, COMPACTION_ITEM], [
        ("compacted", None), ("event_msg", "compaction_usage"), ("event_msg", "token_count"), ("event_msg", "context_compacted"),
    ])
    attempt = CompactionAttempt.objects.get(compaction=result)
    # spec §4.3 step 7: analytics from the usage of the compaction response.
    assert (attempt.tokens_before, attempt.compaction_summary_tokens, attempt.cached_input_tokens) == (700, 40, 512)
    assert attempt.retained_image_count == 0
    assert (result.implementation, result.strategy) == ("responses_compaction_v2", "remote_v2")


@pytest.mark.django_db
def test_token_budget_makes_no_request_and_installs_only_the_initial_context(scripted):
    session = make(scripted, token_budget=True)
    before = Session.objects.get(pk=session.pk)
    result = do_compact_session(session_id=session.pk)
    assert scripted.requests == []
    assert_installed(session, before, result, CTX, [
        ("compacted", None), ("turn_context", None), ("event_msg", "token_count"),
        ("event_msg", "context_compacted"),
    ])
    assert session.reference_context_set is True and session.meter_prefill_source == "estimated"
    assert result.implementation == "token_budget"


@pytest.mark.django_db
def test_two_compactions_chain_window_ids_and_resume_rebuilds_the_cached_history(scripted):
    session = make(scripted, remote="v1")
    first_window = session.window_id
    scripted.add(Reply.json(200, {"output": [U1, COMPACTION_ITEM]}), Reply.json(200, {"output": [compaction("E2")]}))
    one = do_compact_session(session_id=session.pk)
    two = do_compact_session(session_id=session.pk)
    assert (one.window_number, two.window_number) == (1, 2)
    assert two.previous_window_id == one.window_id and one.previous_window_id == first_window
    assert one.first_window_id == two.first_window_id == first_window
    # The second request carries the first compaction's output as its history (spec §4.2) and the new window.
    assert scripted.requests[1].json["input"] == [U1, COMPACTION_ITEM]
    session.refresh_from_db()
    assert live(session) == [compaction("E2")]
    assert verify_projection(session=session) == []
