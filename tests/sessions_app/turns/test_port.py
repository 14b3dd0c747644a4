"""The turn-loop tests' FoldPort behaves like the real port (SessionTurnPort over the database and the compaction
service): the same calls, in the order the loop makes them, give the same observable answers. The turn-loop tests
run against FoldPort, so if the real install step (spec §5.3, §8.1) drifted from the fake's, these fail."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from compaction_app.engine.items import is_real_user_message, user_message
from compaction_app.engine.port import Usage
from compaction_app.engine.thresholds import ModelLimits
from compaction_app.engine.vocabulary import Reason
from compaction_app.models import CompactionPolicy
from sessions_app.models import Session
from sessions_app.rollout import lease as locks
from sessions_app.turns.loop import TurnCompactionFailed, UsageRecord
from sessions_app.turns.port import Holding, SessionTurnPort
from tests.sessions_app.turns.fakes import INITIAL_CONTEXT, FoldPort, assistant

pytestmark = pytest.mark.django_db

SEED = [user_message("fix the flaky test"), assistant("looking", "msg_0")]
TURN = [user_message("now make it pass"), assistant("on it", "msg_1")]
USAGE_TOTAL = 9_000  # far above what the compacted history estimates


@pytest.fixture(params=["fake", "real"])
def port(request, make_session, policy):
    """Each port on the same session: initial context, one earlier turn; a local summary policy for the real one."""
    if request.param == "fake":
        fake = FoldPort(current=ModelLimits(slug="sim-1", context_window=32_000))
        fake.seed(SEED)
        return fake
    CompactionPolicy.objects.filter(pk=policy.pk).update(strategy=CompactionPolicy.Strategy.LOCAL)
    session = make_session(items=SEED, initial_context=INITIAL_CONTEXT)
    lease = locks.acquire(session_id=session.pk, purpose="turn")
    request.addfinalizer(lambda: locks.release(lease))
    return SessionTurnPort(session_id=session.pk, turn_id="turn-1", holding=Holding(lease=lease, own=False))


def _last_user_index(history: list[dict]) -> int:
    return max(i for i, item in enumerate(history) if is_real_user_message(item))


async def _turn_then_compact(port, phase: str) -> dict:
    before = await port.state()
    await port.record([*TURN, UsageRecord(Usage(input_tokens=USAGE_TOTAL - 10, output_tokens=10,
                                                total_tokens=USAGE_TOTAL))])
    recorded = await port.state()
    history = await port.history()
    context = await port.initial_context(recorded)
    await port.compact(reason=Reason.CONTEXT_LIMIT, phase=phase, compact_with=None)
    after = await port.state()
    return {"before": before, "recorded": recorded, "history": history, "context": context, "after": after,
            "compacted": await port.history()}


def test_recording_appends_to_the_history_and_the_usage_sets_the_meter(port):
    seen = async_to_sync(_turn_then_compact)(port, "pre_turn")
    assert seen["history"][-len(TURN):] == TURN
    assert seen["recorded"].active_tokens == USAGE_TOTAL
    assert seen["recorded"].last_seq > seen["before"].last_seq
    assert [i for i in seen["context"] if i in INITIAL_CONTEXT] == INITIAL_CONTEXT


def test_a_mid_turn_compaction_opens_a_window_with_the_context_before_the_last_user_message(port):
    seen = async_to_sync(_turn_then_compact)(port, "mid_turn")
    recorded, after, history = seen["recorded"], seen["after"], seen["compacted"]
    assert after.window_number == recorded.window_number + 1
    assert after.previous_window_id == recorded.window_id and after.window_id != recorded.window_id
    assert after.first_window_id == recorded.first_window_id
    last_user = _last_user_index(history)
    assert history[last_user] == TURN[0]  # the turn's own message is kept (spec §5.2)
    assert history[last_user - len(INITIAL_CONTEXT):last_user] == INITIAL_CONTEXT  # spec §5.3
    assert after.reference_context_set  # a turn_context followed the install (spec §8.1)
    assert after.active_tokens < USAGE_TOTAL  # the meter measures the new history


def test_a_pre_turn_compaction_injects_no_context_and_clears_the_baseline(port):
    seen = async_to_sync(_turn_then_compact)(port, "pre_turn")
    after, history = seen["after"], seen["compacted"]
    assert after.window_number == seen["recorded"].window_number + 1
    assert not any(item in INITIAL_CONTEXT for item in history)  # the next turn injects it (spec §5.3)
    assert not after.reference_context_set
    assert after.active_tokens < USAGE_TOTAL


def test_a_failed_compaction_raises_and_leaves_the_history(port, no_engine_sleeps):
    async def fail() -> tuple[list, list]:
        await port.record(TURN)
        before = await port.history()
        with pytest.raises(TurnCompactionFailed):
            await port.compact(reason=Reason.CONTEXT_LIMIT, phase="pre_turn", compact_with=None)
        return before, await port.history()

    if isinstance(port, FoldPort):
        port.fail_compaction = "the model failed"
    else:
        Session.objects.filter(pk=port.session_id).update(fault_injection={"fault": "server_error"})
    before, after = async_to_sync(fail)()
    assert after == before


def test_a_compaction_that_finds_the_session_held_fails_the_turn_with_the_apis_busy_code(make_session):
    session = make_session(items=SEED, initial_context=INITIAL_CONTEXT)
    other = locks.acquire(session_id=session.pk, purpose="rollback")
    port = SessionTurnPort(session_id=session.pk, turn_id="turn-1", holding=None)
    try:
        with pytest.raises(TurnCompactionFailed) as failed:
            async_to_sync(port.compact)(reason=Reason.CONTEXT_LIMIT, phase="pre_turn", compact_with=None)
    finally:
        locks.release(other)
    assert failed.value.code == "busy"  # the one code of a busy session, as the turn, rollback and job APIs say
