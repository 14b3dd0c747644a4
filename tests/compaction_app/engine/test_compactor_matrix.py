"""Every strategy × phase × injection mode through run_compaction, and the history left untouched by every failure
(spec §2.4, §4, §5.3, §6.5)."""

from __future__ import annotations

import copy

import pytest

from compaction_app.engine.compactor import CompactionRequest
from compaction_app.engine.port import CompactResponse
from compaction_app.engine.provider_errors import ErrorKind
from tests.compaction_app.engine.fakes import (
    INITIAL_CONTEXT,
    OLD_SUMMARY,
    FakeClient,
    assistant,
    completed,
    done,
    error,
    make_settings,
    make_snapshot,
    msg,
    run,
    summary,
)

COMPACTION = {"type": "compaction", "encrypted_content": "ENC"}
U1, U2 = msg("user", "fix the bug"), msg("user", "and add tests")
CTX = INITIAL_CONTEXT

SETTINGS = {
    "local": dict(),
    "remote_v1": dict(remote_compaction="v1"),
    "remote_v2": dict(remote_compaction="v2", remote_compaction_v2=True),
    "token_budget": dict(token_budget=True),
}
# The replacement history each strategy installs, without and with BeforeLastUserMessage injection.
EXPECTED = {
    "local": ([U1, U2, summary("S")], [U1, *CTX, U2, summary("S")]),
    "remote_v1": ([U1, assistant("noted"), COMPACTION], [*CTX, U1, assistant("noted"), COMPACTION]),
    "remote_v2": ([U1, OLD_SUMMARY, U2, COMPACTION], [U1, OLD_SUMMARY, *CTX, U2, COMPACTION]),
    "token_budget": (CTX, CTX),
}


def client_for(strategy: str) -> FakeClient | None:
    if strategy == "local":
        return FakeClient(streams=[[done(assistant("S")), completed()]])
    if strategy == "remote_v1":
        return FakeClient(compacts=[CompactResponse(output=[msg("developer", "stale"), U1, assistant("noted"),
                                                            COMPACTION])])
    if strategy == "remote_v2":
        return FakeClient(streams=[[done(COMPACTION), completed()]])
    return None


@pytest.mark.parametrize("strategy", list(SETTINGS))
@pytest.mark.parametrize("trigger,phase", [("manual", "standalone_turn"), ("auto", "pre_turn"),
                                           ("auto", "mid_turn")])
@pytest.mark.parametrize("injection", ["do_not_inject", "before_last_user_message"])
def test_every_strategy_phase_and_injection(strategy, trigger, phase, injection):
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    request = CompactionRequest(trigger=trigger, phase=phase, injection=injection)
    outcome = run(snapshot=snapshot, settings=make_settings(**SETTINGS[strategy]), request=request,
                  client=client_for(strategy))
    plain, injected = EXPECTED[strategy]
    assert outcome.ok and outcome.strategy == strategy
    assert outcome.replacement_history == (injected if injection == "before_last_user_message" else plain)
    assert outcome.reference_context_set is (strategy == "token_budget" or injection == "before_last_user_message")
    assert outcome.window.number == 4
    assert (outcome.trigger, outcome.phase) == (trigger, phase)
    assert outcome.reason == ("user_requested" if trigger == "manual" else "context_limit")
    assert outcome.attempts[0].phase == phase
    assert snapshot == before


@pytest.mark.parametrize("phase,expected", [("standalone_turn", "do_not_inject"), ("pre_turn", "do_not_inject"),
                                            ("mid_turn", "before_last_user_message")])
def test_injection_is_derived_from_the_phase(phase, expected):
    trigger = "manual" if phase == "standalone_turn" else "auto"
    assert CompactionRequest(trigger=trigger, phase=phase).injection == expected


def test_manual_defaults_to_a_standalone_turn_and_auto_needs_a_phase():
    assert CompactionRequest(trigger="manual").phase == "standalone_turn"
    with pytest.raises(ValueError):
        CompactionRequest(trigger="auto")


FAILURES = {
    "local retries exhausted": ("local", lambda: FakeClient(streams=[error(ErrorKind.SERVER_ERROR)] * 6)),
    "local context window": ("local", lambda: FakeClient(
        streams=[error(ErrorKind.CONTEXT_WINDOW_EXCEEDED)] * 20)),
    "v1 malformed": ("remote_v1", lambda: FakeClient(compacts=[CompactResponse(output={"x": 1})])),
    "v1 http error": ("remote_v1", lambda: FakeClient(compacts=[error(ErrorKind.UNAUTHORIZED, "no key", 401)])),
    "v2 zero items": ("remote_v2", lambda: FakeClient(streams=[[completed()]])),
    "v2 two items": ("remote_v2", lambda: FakeClient(streams=[[done(COMPACTION), done(COMPACTION), completed()]])),
    "v2 retries exhausted": ("remote_v2", lambda: FakeClient(streams=[error(ErrorKind.TIMEOUT)] * 3)),
}


@pytest.mark.parametrize("name", list(FAILURES))
@pytest.mark.parametrize("phase", ["pre_turn", "mid_turn"])
def test_every_failure_leaves_the_snapshot_and_window_untouched(name, phase):
    strategy, make_client = FAILURES[name]
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    outcome = run(snapshot=snapshot, settings=make_settings(**SETTINGS[strategy]),
                  request=CompactionRequest(trigger="auto", phase=phase), client=make_client())
    assert not outcome.ok and outcome.status == "failed"
    assert outcome.replacement_history is None and outcome.window == before.window
    assert "item_completed" not in [e.type for e in outcome.events]
    assert outcome.events[-1].type == "error"
    assert snapshot == before
    with pytest.raises(ValueError):
        outcome.compacted_item()
