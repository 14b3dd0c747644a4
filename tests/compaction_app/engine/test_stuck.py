"""Which overflow situations leave a session stuck (Codex itself would fail every turn) and which recoveries can
still help (compaction_app.engine.stuck; spec §2.2, §4.4, §5.4, §6.1, §6.3, §6.5)."""

from compaction_app.engine.stuck import stuck_state

NUMBERS = {"tokens_in_window": 31_021, "usable_context_window": 30_400}


def failed(strategy: str, implementation: str, error_kind: str = "context_window_exceeded") -> dict:
    return {"status": "failed", "strategy": strategy, "implementation": implementation, "error_kind": error_kind}


def test_a_remote_compaction_that_overflows_the_window_offers_both_recoveries():
    for strategy, implementation in (("remote_v1", "responses_compact"), ("remote_v2", "responses_compaction_v2")):
        assert stuck_state(failed(strategy, implementation)).recoveries == ("local", "token_budget")


def test_a_local_summarisation_that_ran_out_of_room_offers_only_a_new_window():
    state = stuck_state(failed("local", "responses"))
    assert state.recoveries == ("token_budget",) and "local summarisation trimmed everything" in state.reason
    # an imported Codex attempt names only its implementation
    assert stuck_state(failed("", "responses")).recoveries == ("token_budget",)


def test_a_compaction_that_left_the_history_over_the_usable_window_is_stuck():
    attempt = {"status": "completed", "strategy": "remote_v2", "implementation": "responses_compaction_v2",
               "tokens_before": 31_050, "tokens_after": 31_021}
    state = stuck_state(attempt, NUMBERS)
    assert state.recoveries == ("local", "token_budget") and "31,021 tokens" in state.reason
    local = {**attempt, "strategy": "local", "implementation": "responses"}
    assert stuck_state(local, NUMBERS).recoveries == ("token_budget",)


def test_sessions_that_can_go_on_are_not_stuck():
    assert stuck_state(None) is None
    assert stuck_state(failed("remote_v1", "responses_compact", "server_overloaded")) is None  # the next turn retries
    assert stuck_state({"status": "running", "error_kind": ""}, NUMBERS) is None
    under = {"status": "completed", "strategy": "local", "implementation": "responses", "tokens_after": 4_000}
    assert stuck_state(under, {**NUMBERS, "tokens_in_window": 4_000}) is None
    # over the window again after later turns, but the last compaction brought it under: the next one runs normally
    assert stuck_state(under, NUMBERS) is None
    over = {**under, "tokens_after": 31_021}
    assert stuck_state(over, None) is None  # without the live numbers nothing is claimed
