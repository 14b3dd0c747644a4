"""Every failure path through the service leaves the history exactly as it was (spec §6.5, §9): live items, a
rebuild from the rollout, the window and the meter; the attempt, an `error` rollout line and the audit log record
what happened. Also the previous-model fallback of spec §6.4."""

from __future__ import annotations

import asyncio

import pytest

from compaction_app.engine.items import user_message
from compaction_app.engine.prompts import CONTEXT_WINDOW_EXCEEDED_MESSAGE
from compaction_app.models import AuditEntry, Compaction, CompactionAttempt, CompactionPolicy, Provider
from sessions_app.compactions.services import (
    CompactionFailed,
    CompactionRefused,
    backoff_sleep,
    do_compact_session,
)
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout.services import NewLine, append_rollout_lines, do_create_session, verify_projection
from tests.fakes.scripted_provider import (
    Reply,
    ScriptedProvider,
    assistant,
    compaction,
    completed,
    created,
    output_item_done,
)

U1 = user_message("refactor the cache layer")
A1 = assistant("Working on it.")
CWE = {"error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window."}}
SERVER_ERROR = {"error": {"code": "server_error", "message": "upstream exploded"}}


@pytest.fixture
def scripted():
    provider = ScriptedProvider()
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


def make(scripted, *, remote: str = "none", stream_retries: int = 2, **policy_fields) -> Session:
    provider = Provider.objects.create(
        name=f"scripted-{remote}", base_url=scripted.base_url, model="gpt-test", context_window=20_000,
        remote_compaction=remote, stream_max_retries=stream_retries, request_max_retries=0,
    )
    policy = CompactionPolicy.objects.create(name=f"p-{remote}", **policy_fields)
    return do_create_session(title="f", provider=provider, policy=policy, base_instructions="base",
                             items=[U1, A1])


def new_lines(session: Session, seq: int) -> list[RolloutLine]:
    return list(RolloutLine.objects.filter(session=session, seq__gt=seq).order_by("seq"))


def assert_failure_recorded(session, before_seq, failed: CompactionFailed, *, kind: str, status: str = "failed"):
    attempt = CompactionAttempt.objects.get(pk=failed.attempt.pk)
    assert attempt.status == status and attempt.error_kind == kind and attempt.compaction is None
    assert attempt.completed_at is not None
    error_line = new_lines(session, before_seq)[-1]
    assert error_line.kind == "event_msg" and error_line.payload["type"] == "error"
    assert error_line.payload["codex_error_info"] == kind and error_line.payload["attempt_id"] == attempt.pk
    assert AuditEntry.objects.filter(action="compaction_failed", session=session).count() == 1
    assert not Compaction.objects.filter(session=session).exists()
    return attempt


@pytest.mark.django_db
def test_local_stream_errors_are_retried_then_the_failure_changes_nothing(scripted, observable_state,
                                                                            recorded_sleeps):
    session = make(scripted)
    before, seq = observable_state(session), session.last_seq
    scripted.add(*[Reply.error(500, SERVER_ERROR) for _ in range(3)])
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk, strategy="local", sleep=recorded_sleeps)
    assert len(scripted.requests) == 3  # the first try and stream_max_retries = 2 retries (spec §6.2)
    assert len(recorded_sleeps) == 2
    attempt = assert_failure_recorded(session, seq, failed.value, kind="server_error")
    assert (attempt.retries, attempt.error_http_status) == (2, 500)
    assert [line.kind for line in new_lines(session, seq)] == ["event_msg"]
    assert observable_state(session) == before
    assert verify_projection(session=session) == []


@pytest.mark.django_db
def test_policy_retry_override_beats_the_provider_setting(scripted):
    session = make(scripted, stream_retries=5, stream_max_retries=0)
    scripted.add(Reply.error(500, SERVER_ERROR))
    with pytest.raises(CompactionFailed):
        do_compact_session(session_id=session.pk, strategy="local")
    assert len(scripted.requests) == 1 and scripted.unexpected == 0


@pytest.mark.django_db
def test_remote_v1_malformed_output_fails_without_retry_and_changes_nothing(scripted, observable_state):
    session = make(scripted, remote="v1")
    before, seq = observable_state(session), session.last_seq
    scripted.add(Reply.json(200, {"output": "not a list"}))
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk)
    assert "invalid type: string" in failed.value.message
    assert_failure_recorded(session, seq, failed.value, kind="bad_response")
    assert len(scripted.requests) == 1
    assert observable_state(session) == before


@pytest.mark.django_db
def test_remote_v2_two_compaction_items_is_a_fatal_error_with_codex_wording(scripted, observable_state):
    session = make(scripted, remote="v2", remote_compaction_v2=True)
    before, seq = observable_state(session), session.last_seq
    scripted.add(Reply.sse([created(), output_item_done(compaction("a")), output_item_done(compaction("b"), 1),
                            completed()]))
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk)
    assert failed.value.message == (
        "Error running remote compact task: "
        "remote compaction v2 expected exactly one compaction output item, got 2 from 2 output items"
    )
    assert_failure_recorded(session, seq, failed.value, kind="fatal")
    assert len(scripted.requests) == 1  # fatal: not retried (spec §4.3 step 4)
    assert observable_state(session) == before


@pytest.mark.django_db
def test_local_context_window_exceeded_trims_to_one_item_then_pins_the_meter_and_keeps_history(
    scripted, observable_state
):
    session = make(scripted)
    before, seq = observable_state(session), session.last_seq
    scripted.add(*[Reply.error(400, CWE) for _ in range(3)])
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk, strategy="local")
    # spec §6.1: [U1, A1, prompt] → [A1, prompt] → [prompt] → fail with Codex's message.
    assert [len(r.json["input"]) for r in scripted.requests] == [3, 2, 1]
    assert failed.value.message == CONTEXT_WINDOW_EXCEEDED_MESSAGE
    assert_failure_recorded(session, seq, failed.value, kind="context_window_exceeded")
    assert [(line.kind, line.payload["type"]) for line in new_lines(session, seq)] == [
        ("event_msg", "token_count"), ("event_msg", "error")]
    after = observable_state(session)
    # spec §3.2: usage pinned to the usable window; the history and the window are untouched.
    assert after["tokens_in_window"] == session.provider.usable_context_window
    assert {k: v for k, v in after.items() if k not in ("meter", "tokens_in_window")} == {
        k: v for k, v in before.items() if k not in ("meter", "tokens_in_window")}
    assert verify_projection(session=session) == []


@pytest.mark.django_db
def test_a_strategy_the_provider_cannot_run_is_refused_and_records_nothing(scripted, observable_state):
    session = make(scripted, remote="none")
    before, seq = observable_state(session), session.last_seq
    with pytest.raises(CompactionRefused, match="remote_v2 needs a provider"):
        do_compact_session(session_id=session.pk, strategy="remote_v2")
    with pytest.raises(CompactionRefused, match="extra instructions apply to local summarization only"):
        do_compact_session(session_id=session.pk, strategy="token_budget", instructions="be brief")
    with pytest.raises(CompactionRefused, match="needs a phase"):
        do_compact_session(session_id=session.pk, trigger="auto")
    assert scripted.requests == []
    assert not CompactionAttempt.objects.filter(session=session).exists()
    assert new_lines(session, seq) == [] and observable_state(session) == before
    assert Session.objects.get(pk=session.pk).lease_holder == ""


@pytest.mark.django_db
def test_malformed_fault_injection_is_refused_before_anything_runs(scripted):
    session = make(scripted)
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": "meteor_strike"})
    with pytest.raises(CompactionRefused, match="unknown fault 'meteor_strike'"):
        do_compact_session(session_id=session.pk, strategy="local")
    assert not CompactionAttempt.objects.filter(session=session).exists()


@pytest.mark.django_db
def test_model_downshift_compacts_with_the_previous_model_and_falls_back_to_the_current_one(scripted):
    session = make(scripted, remote="v1")
    append_rollout_lines(session=session, lines=[NewLine("turn_context", {"turn_id": "t1", "model": "gpt-big"})])
    invalid = {"error": {"code": "invalid_request_error", "message": "model gpt-big cannot compact"}}
    scripted.add(Reply.error(400, invalid), Reply.json(200, {"output": [U1, compaction("E")]}))
    result = do_compact_session(session_id=session.pk, trigger="auto", phase="pre_turn", reason="model_downshift")
    assert [r.json["model"] for r in scripted.requests] == ["gpt-big", "gpt-test"]
    assert result.reason == "model_downshift"
    audit = AuditEntry.objects.get(compaction=result)
    assert audit.detail["model"] == "gpt-test"
    assert audit.detail["model_fallback"] == {"reason": "model_downshift", "implementation": "responses_compact",
                                              "outcome": "succeeded"}


@pytest.mark.django_db
def test_output_the_rollout_cannot_store_fails_the_attempt_and_changes_nothing(scripted, observable_state):
    session = make(scripted, remote="v1")
    before, seq = observable_state(session), session.last_seq
    scripted.add(Reply.json(200, {"output": [U1, {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}]}))
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk)
    assert failed.value.message.startswith("the compacted history cannot be stored:")
    assert_failure_recorded(session, seq, failed.value, kind="bad_response")
    assert observable_state(session) == before


@pytest.mark.django_db
def test_a_compaction_item_without_string_content_is_a_bad_response_and_changes_nothing(scripted, observable_state):
    session = make(scripted, remote="v1")
    before, seq = observable_state(session), session.last_seq
    scripted.add(Reply.json(200, {"output": [U1, {"type": "compaction", "encrypted_content": 7}]}))
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk)
    assert failed.value.kind == "bad_response"
    assert failed.value.message.startswith(
        "Error running remote compact task: invalid type: integer `7`, expected a string")
    assert_failure_recorded(session, seq, failed.value, kind="bad_response")
    assert observable_state(session) == before


@pytest.mark.django_db
def test_an_engine_crash_is_recorded_as_an_internal_error_and_changes_nothing(scripted, observable_state, monkeypatch):
    session = make(scripted, remote="v1")
    before, seq = observable_state(session), session.last_seq

    async def crashing_engine(**kwargs):
        raise RuntimeError("engine bug")

    monkeypatch.setattr("sessions_app.compactions.services.run_compaction", crashing_engine)
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk)
    assert failed.value.kind == "internal_error"
    assert_failure_recorded(session, seq, failed.value, kind="internal_error")
    assert observable_state(session) == before
    assert Session.objects.get(pk=session.pk).lease_holder == ""


def test_the_backoff_waits_real_time_unless_the_setting_scales_it(settings):
    settings.COMPACTWEB_RETRY_BACKOFF_SCALE = 1
    assert backoff_sleep() is asyncio.sleep
    settings.COMPACTWEB_RETRY_BACKOFF_SCALE = 0
    assert backoff_sleep() is not asyncio.sleep
    asyncio.run(asyncio.wait_for(backoff_sleep()(3600), timeout=5))  # an hour's backoff, scaled to nothing
