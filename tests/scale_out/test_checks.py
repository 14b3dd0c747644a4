"""The fault suite's one checker (tests/scale_out/checks.py) fails on each fault it is there to catch: a fleet's
rollouts after real simulator steps pass it, and the same rollouts with a line lost, a line duplicated, a turn left
without its end, a run that failed, or a deadlock in a process log each fail it. Runs in both passes (the steps are
in-process; the deadlock count is PostgreSQL's own where there is one)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.rollout.services import NewLine, append_rollout_lines
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = 6  # on the test provider's small window: turns and a compaction or two


@pytest.fixture
def fleet_run(provider, policy, tmp_path):
    """Two looping sessions stepped in-process, stopped; their ids, a clean log, and the deadlock count before."""
    before = database_deadlocks()
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=2, provider=provider, policy=policy, loop=True,
                                seed=42, context_window=4_000)
    session_ids = [run.session_id for run in runs]
    for _ in range(STEPS):
        for session_id in session_ids:
            assert fleet.do_run_step(session_id=session_id).status == "ran"
    fleet.do_stop_run()
    log = tmp_path / "worker.log"
    log.write_text("Task sessions_app.fleet.tasks.run_simulator_step succeeded in 0.2s: 'ran'\n")
    return session_ids, log, before


def _append(session_id: int, *lines: NewLine) -> None:
    append_rollout_lines(session=Session.objects.get(pk=session_id), lines=list(lines))


def _first(session_id: int, **filters) -> RolloutLine:
    return RolloutLine.objects.filter(session_id=session_id, **filters).order_by("seq").first()


def test_a_clean_fleet_run_passes_and_says_what_it_checked(fleet_run):
    session_ids, log, before = fleet_run

    checked = assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)

    assert checked["sessions"] == 2 and checked["turns"] == 2 * STEPS
    assert checked["compactions"] >= 1 and checked["deadlocks"] == 0


def test_a_duplicated_line_fails_it(fleet_run):
    session_ids, log, before = fleet_run
    started = _first(session_ids[0], kind="event_msg", payload__type="turn_started")
    _append(session_ids[0], NewLine("event_msg", dict(started.payload)))  # the same turn's start, written twice

    with pytest.raises(AssertionError, match="a turn started twice|duplicated"):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)


def test_a_duplicated_turn_end_fails_it(fleet_run):
    session_ids, log, before = fleet_run
    ended = _first(session_ids[1], kind="event_msg", payload__type="turn_complete")
    _append(session_ids[1], NewLine("event_msg", dict(ended.payload)))

    with pytest.raises(AssertionError, match="duplicated lines"):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)


def test_a_model_answer_written_twice_in_its_turn_fails_it(fleet_run):
    session_ids, log, before = fleet_run
    last = RolloutLine.objects.filter(session_id=session_ids[0], kind="response_item",
                                      payload__has_key="id").order_by("-seq").first()
    _append(session_ids[0], NewLine("response_item", dict(last.payload)))  # the write ran again

    with pytest.raises(AssertionError, match="duplicated lines"):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)


def test_a_turn_left_without_its_end_fails_it(fleet_run):
    session_ids, log, before = fleet_run
    _append(session_ids[0], NewLine("event_msg", {"type": "turn_started", "turn_id": "cut-turn",
                                                  "model_context_window": 4_000}))

    with pytest.raises(AssertionError, match="a turn never ended|a turn started twice"):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)


def test_an_interrupted_end_without_its_error_line_fails_it(fleet_run):
    session_ids, log, before = fleet_run
    _append(session_ids[0],
            NewLine("event_msg", {"type": "turn_started", "turn_id": "cut-turn", "model_context_window": 4_000}),
            NewLine("event_msg", {"type": "turn_complete", "turn_id": "cut-turn", "status": "interrupted",
                                  "last_agent_message": None}))

    with pytest.raises(AssertionError):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)


def test_a_lost_line_fails_it(fleet_run):
    session_ids, log, before = fleet_run
    session = Session.objects.get(pk=session_ids[1])
    # A line stored past a gap (the one before it lost), behind the projection's back.
    RolloutLine.objects.create(session=session, seq=session.last_seq + 2, timestamp=timezone.now(),
                               kind="event_msg", payload={"type": "warning", "message": "after a gap"})

    with pytest.raises(AssertionError, match="a line lost"):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)


def test_a_failed_run_fails_it(fleet_run):
    session_ids, log, before = fleet_run
    SimulatorRun.objects.filter(session_id=session_ids[0]).update(status=SimulatorRun.Status.FAILED)

    with pytest.raises(AssertionError):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)


@pytest.mark.parametrize("line", [
    "django.db.utils.OperationalError: deadlock detected",
    "WARNING compactweb.db_outage: transaction rolled back for a conflict (40P01), retry 1 of 4",
])
def test_a_deadlock_in_a_process_log_fails_it(fleet_run, line):
    session_ids, log, before = fleet_run
    with log.open("a") as out:
        out.write(line + "\n")

    with pytest.raises(AssertionError, match="deadlock|40P01"):
        assert_fault_run_clean(session_ids, logs=[log], deadlocks_before=before)
