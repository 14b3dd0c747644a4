"""Compactions against the embedded simulated provider (in-process), with its faults switched on per session through
`session.fault_injection` (sessions_app.compactions.settings_builder.fault_headers)."""

from __future__ import annotations

import uuid

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.prompts import SUMMARIZATION_PROMPT
from compaction_app.engine.thresholds import ModelLimits
from compaction_app.engine.tokens import counter
from compaction_app.models import CompactionAttempt, CompactionPolicy
from sessions_app.compactions.services import CompactionFailed, do_compact_session
from sessions_app.compactions.settings_builder import fault_headers
from sessions_app.models import LiveItem, Session
from sessions_app.rollout.services import verify_projection

U1 = user_message("please migrate the settings module to pydantic")
U2 = user_message("and keep backwards compatibility")


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


A1, A2 = assistant("Migrating settings now."), assistant("Kept the old names as aliases.")


def live(session) -> list[dict]:
    return list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))


def with_faults(session, **faults) -> Session:
    Session.objects.filter(pk=session.pk).update(fault_injection=faults)
    return Session.objects.get(pk=session.pk)


def unique(fault: str) -> str:
    """A fault spec with a fresh counter key: counted faults are shared by every client of the simulator."""
    return f"{fault};key={uuid.uuid4().hex}"


@pytest.fixture
def sim_session(make_session):
    return make_session(items=[U1, A1, U2, A2], base_instructions="sim base")


def test_fault_injection_maps_to_simulator_headers():
    assert fault_headers({"fault": "overloaded;times=2", "context_window": 500, "reasoning_included": True}) == {
        "x-sim-fault": "overloaded;times=2", "x-sim-context-window": "500", "x-sim-reasoning-included": "true"}
    assert fault_headers({}) == {}
    with pytest.raises(ValueError, match="unknown key"):
        fault_headers({"faults": "x"})
    with pytest.raises(ValueError, match="positive integer"):
        fault_headers({"context_window": 0})


@pytest.mark.django_db
@pytest.mark.parametrize("strategy", ["local", "remote_v1", "remote_v2", "token_budget"])
def test_each_strategy_installs_against_the_simulated_provider(sim_session, strategy):
    result = do_compact_session(session_id=sim_session.pk, strategy=strategy)
    sim_session.refresh_from_db()
    history = live(sim_session)
    if strategy == "local":
        assert history[:2] == [U1, U2]
        assert history[2]["content"][0]["text"].startswith(SUMMARY_PREFIX + "\n")
        assert result.summary and result.summary in history[2]["content"][0]["text"]
    elif strategy == "token_budget":
        assert history == []  # the session has no initial context: the new window starts empty (spec §4.4)
    else:
        assert [i for i in history if i["type"] == "message"] == [U1, U2]
        assert history[-1]["type"] == "compaction"
    assert sim_session.window_number == 1 and sim_session.tokens_in_window == result.tokens_after
    assert verify_projection(session=sim_session) == []


@pytest.mark.django_db
def test_policy_auto_selection_uses_remote_v2_for_a_v2_provider(sim_session):
    assert sim_session.policy.strategy == CompactionPolicy.Strategy.AUTO
    result = do_compact_session(session_id=sim_session.pk)
    assert (result.strategy, result.implementation) == ("remote_v2", "responses_compaction_v2")


@pytest.mark.django_db
def test_overloaded_local_compaction_is_retried_and_then_succeeds(sim_session, recorded_sleeps):
    with_faults(sim_session, fault=unique("overloaded;times=2"))
    result = do_compact_session(session_id=sim_session.pk, strategy="local", sleep=recorded_sleeps)
    attempt = CompactionAttempt.objects.get(compaction=result)
    assert attempt.retries == 2 and attempt.status == "completed"
    assert len(recorded_sleeps) == 2


@pytest.mark.django_db
def test_overloaded_remote_v2_is_retried_at_most_twice(sim_session):
    with_faults(sim_session, fault=unique("overloaded;times=3"))
    before = live(sim_session)
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=sim_session.pk, strategy="remote_v2")
    assert failed.value.kind == "server_overloaded"
    assert CompactionAttempt.objects.get(pk=failed.value.attempt.pk).retries == 2  # min(stream_max_retries, 2)
    assert live(sim_session) == before


@pytest.mark.django_db
def test_v2_two_compaction_items_fails_fatally_and_keeps_history(sim_session, observable_state):
    session = with_faults(sim_session, fault="v2_two")
    before = observable_state(session)
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk, strategy="remote_v2")
    assert failed.value.kind == "fatal"
    assert failed.value.message.startswith(
        "Error running remote compact task: remote compaction v2 expected exactly one compaction output item, got 2")
    assert observable_state(session) == before


@pytest.mark.django_db
def test_compact_malformed_fails_remote_v1_and_keeps_history(sim_session, observable_state):
    session = with_faults(sim_session, fault="compact_malformed")
    before = observable_state(session)
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk, strategy="remote_v1")
    assert failed.value.kind == "bad_response"
    assert observable_state(session) == before
    assert Session.objects.get(pk=session.pk).window_number == 0


@pytest.mark.django_db
def test_context_window_exceeded_trims_the_request_but_still_collects_trimmed_user_messages(make_session):
    long_request = user_message("Please look at this stack trace:\n" + "frame at module.function(line)\n" * 120)
    session = make_session(items=[long_request, A1, U2, A2], base_instructions="sim base")
    tokens = counter("o200k_base")
    # A window that fits everything but the long first message (spec §6.1: drop the oldest item and retry).
    fits = tokens.count_text("sim base") + sum(tokens.count_item(i) for i in [A1, U2, A2,
                                                                               user_message(SUMMARIZATION_PROMPT)])
    session = with_faults(session, context_window=fits + 5)
    result = do_compact_session(session_id=session.pk, strategy="local")
    history = live(session)
    assert history[:2] == [long_request, U2]  # collected from the live history, not the trimmed request
    assert result.window_number == 1


@pytest.mark.django_db
def test_context_window_exceeded_on_every_request_pins_the_meter_and_keeps_history(sim_session, observable_state):
    session = with_faults(sim_session, fault="context_window_exceeded")
    before = observable_state(session)
    with pytest.raises(CompactionFailed) as failed:
        do_compact_session(session_id=session.pk, strategy="local")
    assert failed.value.kind == "context_window_exceeded"
    after = observable_state(session)
    assert after["tokens_in_window"] == session.provider.usable_context_window
    assert (after["live"], after["rebuilt"], after["window"]) == (before["live"], before["rebuilt"], before["window"])


@pytest.mark.django_db
def test_model_downshift_compacts_within_the_previous_models_window(make_session, provider):
    """spec §2.4.1a: the previous (larger) model compacts a history that no longer fits the new model's window."""
    provider.context_window = 4000
    provider.save()
    filler = "log line with some words in it\n" * 700  # about 5.6k tokens: over the new 4k window
    session = make_session(items=[U1, A1, user_message(filler), A2], base_instructions="sim base")
    assert session.tokens_in_window > 4000
    with pytest.raises(CompactionFailed) as too_big:
        do_compact_session(session_id=session.pk, trigger="auto", reason="model_downshift", phase="pre_turn",
                           compact_with=ModelLimits(slug="sim-big", context_window=None))  # the session's window
    assert too_big.value.kind == "context_window_exceeded"
    compaction = do_compact_session(session_id=session.pk, trigger="auto", reason="model_downshift",
                                    phase="pre_turn", compact_with=ModelLimits(slug="sim-big", context_window=32000))
    assert compaction.reason == "model_downshift"
    attempt = CompactionAttempt.objects.filter(compaction=compaction).get()
    assert attempt.status == "completed"
    assert verify_projection(session=Session.objects.get(pk=session.pk)) == []
