"""The fleet through a database outage (issue 31): a step the outage interrupts fails nothing and is due again as
soon as the database takes writes (its lease given back), and the scheduler beats only after rounds that reached
the database, so the watchdog restarts one that cannot work. tests/scale_out/test_database_outage.py cuts a real
PostgreSQL under a running set."""

from __future__ import annotations

import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError

from compactweb import db_outage
from sessions_app.fleet import runtime as fleet
from sessions_app.fleet.scheduler import Scheduler
from sessions_app.models import Session, SimulatorRun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(provider, policy):
    return fleet.do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy, loop=True)[0]


@pytest.fixture
def no_outage_waits(monkeypatch):
    monkeypatch.setattr(db_outage, "RETRY_SECONDS", 0.0)


def outage_for(calls: int, then=None):
    """A stand-in that raises the database's outage error `calls` times, then calls `then`."""
    count = {"n": 0}

    def call(*args, **kwargs):
        count["n"] += 1
        if count["n"] <= calls:
            raise OperationalError("server closed the connection unexpectedly")
        return then(*args, **kwargs) if then else None

    return call


def test_a_step_the_outage_interrupts_fails_nothing_gives_the_lease_back_and_is_due_at_once(
        run, monkeypatch, no_outage_waits):
    async def turn(**kwargs):
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr(fleet, "arun_turn", turn)
    # the database refuses writes twice more after the turn failed, then it is back
    monkeypatch.setattr(db_outage, "check_writable", outage_for(2, then=db_outage.check_writable))
    fleet.claim_due_runs()  # the scheduler claimed it: not due for CLAIM_SECONDS

    result = fleet.do_run_step(session_id=run.session_id)

    assert result.status == fleet.INTERRUPTED and "administrator command" in result.error
    run.refresh_from_db()
    session = Session.objects.get(pk=run.session_id)
    assert run.status == SimulatorRun.Status.RUNNING and run.last_error == ""
    assert session.state == Session.State.RUNNING and session.lease_holder == ""
    assert fleet.claim_due_runs() == [run.session_id]  # due now, not after CLAIM_SECONDS
    monkeypatch.undo()
    assert fleet.do_run_step(session_id=run.session_id).status == "ran"


def test_an_outage_between_taking_the_lease_and_reading_the_step_gives_the_lease_back(
        run, monkeypatch, no_outage_waits):
    monkeypatch.setattr(fleet, "_prepare_step", outage_for(1))

    result = fleet.do_run_step(session_id=run.session_id)

    assert result.status == fleet.INTERRUPTED
    assert Session.objects.get(pk=run.session_id).lease_holder == ""
    assert SimulatorRun.objects.get(pk=run.pk).status == SimulatorRun.Status.RUNNING


def test_a_step_whose_database_stays_away_past_its_claim_gives_up_without_failing_the_run(
        run, monkeypatch, settings, no_outage_waits):
    settings.COMPACTWEB_LEASE_TTL_SECONDS = 0.05

    async def turn(**kwargs):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(fleet, "arun_turn", turn)
    monkeypatch.setattr(db_outage, "check_writable", outage_for(10**9))
    monkeypatch.setattr(fleet, "CLAIM_SECONDS", 0.1)  # past its claim the scheduler hands the run out again

    result = fleet.do_run_step(session_id=run.session_id)

    assert result.status == "failed"
    assert SimulatorRun.objects.get(pk=run.pk).status == SimulatorRun.Status.RUNNING  # the claim lapses, it runs on


def test_a_step_whose_database_returns_after_the_lease_ttl_but_within_its_claim_resumes_at_once(
        run, monkeypatch, settings, no_outage_waits):
    """Issue 42: an outage longer than the lease TTL left the session to wait out its two-minute claim."""
    settings.COMPACTWEB_LEASE_TTL_SECONDS = 0.05
    outage = {"began": None}

    async def turn(**kwargs):
        raise OperationalError("could not connect to server")

    real_check = db_outage.check_writable

    def away_for_four_ttls():  # the database refuses writes for 0.2 s, four lease TTLs, then takes them
        outage["began"] = outage["began"] or time.monotonic()
        if time.monotonic() - outage["began"] < 4 * settings.COMPACTWEB_LEASE_TTL_SECONDS:
            raise OperationalError("could not connect to server")
        return real_check()

    monkeypatch.setattr(fleet, "arun_turn", turn)
    monkeypatch.setattr(db_outage, "check_writable", away_for_four_ttls)
    claimed_at = time.time()
    fleet.claim_due_runs(now=claimed_at)

    result = fleet.do_run_step(session_id=run.session_id, claimed_at=claimed_at)

    assert result.status == fleet.INTERRUPTED  # waited past the TTL for the database, not given up
    assert Session.objects.get(pk=run.session_id).lease_holder == ""
    assert fleet.claim_due_runs() == [run.session_id]  # due now, not after CLAIM_SECONDS


def test_an_unexpected_error_still_marks_the_run_failed(run, monkeypatch):
    async def turn(**kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(fleet, "arun_turn", turn)

    assert fleet.do_run_step(session_id=run.session_id).status == "failed"
    assert SimulatorRun.objects.get(pk=run.pk).status == SimulatorRun.Status.FAILED


def run_rounds(sched: Scheduler, rounds: int) -> list[bool]:
    """Run the scheduler for `rounds` rounds; for each, whether it beat."""
    stop, beats, seen = threading.Event(), [], {"rounds": 0}
    real_after = sched._after_round

    async def after_round(failures):
        before = sched.heartbeat_path.stat().st_mtime_ns if sched.heartbeat_path.exists() else None
        time.sleep(0.002)  # the file's clock moves between two beats
        await real_after(failures)
        after = sched.heartbeat_path.stat().st_mtime_ns if sched.heartbeat_path.exists() else None
        beats.append(after != before)
        seen["rounds"] += 1
        if seen["rounds"] == rounds:
            stop.set()

    sched._after_round = after_round
    async_to_sync(sched.run)(stop)
    return beats


def test_the_scheduler_beats_only_after_rounds_that_reached_the_database(run, tmp_path, monkeypatch, caplog):
    sched = Scheduler(inline=True, poll_seconds=0.001, heartbeat_path=tmp_path / "beat",
                      step=lambda **kwargs: None)
    monkeypatch.setattr(fleet, "claim_due_runs", outage_for(3, then=lambda **kwargs: []))

    beats = run_rounds(sched, 5)

    assert beats == [False, False, False, True, True]
    assert sched.database_down is False
    # an outage is logged when it starts and when it ends, not every round
    assert caplog.text.count("the database does not answer") == 1
    assert caplog.text.count("simulator tick failed") == 1
    assert "the database is back" in caplog.text


def test_a_round_that_fails_for_another_reason_still_beats(run, tmp_path, monkeypatch):
    sched = Scheduler(inline=True, poll_seconds=0.001, heartbeat_path=tmp_path / "beat")

    def broken(**kwargs):
        raise ValueError("not the database")

    monkeypatch.setattr(fleet, "claim_due_runs", broken)

    assert run_rounds(sched, 2) == [True, True]


def test_the_scheduler_closes_a_connection_the_outage_broke_before_its_next_round(run, tmp_path, monkeypatch):
    from django.db import connection

    sched = Scheduler(inline=True, poll_seconds=0.001, heartbeat_path=tmp_path / "beat")
    closed = []
    monkeypatch.setattr(db_outage, "drop_broken_connections", lambda: closed.append(1) or 0)

    run_rounds(sched, 2)

    assert closed == [1, 1]
    assert connection.vendor  # the scheduler's own rounds ran on the test database



# --- whose turn an interrupted step ends (issue 42: one turn with two `turn_complete` lines after a 10 s cut) -----

def _write(session_id: int, payload: dict) -> None:
    from sessions_app.rollout.services import NewLine, append_rollout_lines

    append_rollout_lines(session=Session.objects.get(pk=session_id), lines=[NewLine("event_msg", payload)])


def _started(turn_id: str) -> dict:
    return {"type": "turn_started", "turn_id": turn_id, "model_context_window": 1000}


def _ends(session_id: int) -> list[tuple[str, str]]:
    from sessions_app.models import RolloutLine

    return [(line["turn_id"], line["status"]) for line in RolloutLine.objects.filter(
        session_id=session_id, kind="event_msg", payload__type="turn_complete").order_by("seq").values_list(
        "payload", flat=True)]


def test_a_step_cut_before_it_took_the_lease_ends_no_turn_of_the_holder(run, monkeypatch, no_outage_waits):
    """A worker's kept connection, broken by the database's restart, failed the first statement of a step (a
    message sent for an older claim) before it took the lease; the step then ended the session's open turn, which
    was the lease holder's, live: that turn got an interrupted end and, later, its own `turn_complete`."""
    from sessions_app.rollout import lease as locks

    holder = locks.acquire(session_id=run.session_id, purpose="turn")
    _write(run.session_id, _started("holders-turn"))
    monkeypatch.setattr(fleet, "has_queued", outage_for(1))  # the step's first statement

    result = fleet.do_run_step(session_id=run.session_id)

    assert result.status == fleet.INTERRUPTED and "server closed the connection" in result.error
    assert _ends(run.session_id) == []  # the holder's turn is still the holder's to end
    assert Session.objects.get(pk=run.session_id).lease_holder == holder.holder
    _write(run.session_id, {"type": "turn_complete", "turn_id": "holders-turn", "status": "completed"})
    assert _ends(run.session_id) == [("holders-turn", "completed")]


def test_a_step_whose_lease_was_taken_over_ends_its_own_turn_once_and_not_the_takers(
        run, monkeypatch, no_outage_waits):
    from datetime import timedelta

    from asgiref.sync import sync_to_async
    from django.utils import timezone

    from sessions_app.rollout import lease as locks

    taker = {}

    def cut_and_taken_over(turn_id: str) -> None:
        _write(run.session_id, _started(turn_id))
        # The outage outlasted the lease: another step took the session over (ending this step's turn as the dead
        # holder's) and began its own turn before this step's database came back.
        Session.objects.filter(pk=run.session_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        taker["lease"] = locks.acquire(session_id=run.session_id, purpose="turn")
        _write(run.session_id, _started("takers-turn"))

    async def turn(**kwargs):
        taker["cut"] = kwargs["turn_id"]
        await sync_to_async(cut_and_taken_over)(kwargs["turn_id"])
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(fleet, "arun_turn", turn)

    assert fleet.do_run_step(session_id=run.session_id).status == fleet.INTERRUPTED

    assert _ends(run.session_id) == [(taker["cut"], "interrupted")]  # by the taker, once; the taker's turn: open
    assert Session.objects.get(pk=run.session_id).lease_holder == taker["lease"].holder


def test_a_step_cut_mid_turn_that_still_holds_its_lease_ends_its_turn_when_the_database_returns(
        run, monkeypatch, no_outage_waits):
    from asgiref.sync import sync_to_async

    cut = {}

    async def turn(**kwargs):
        cut["turn"] = kwargs["turn_id"]
        await sync_to_async(_write)(run.session_id, _started(kwargs["turn_id"]))
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(fleet, "arun_turn", turn)

    assert fleet.do_run_step(session_id=run.session_id).status == fleet.INTERRUPTED

    assert _ends(run.session_id) == [(cut["turn"], "interrupted")]
    assert Session.objects.get(pk=run.session_id).lease_holder == ""


def test_a_step_whose_turn_found_its_lease_taken_over_leaves_the_run_running_and_due_again(run, monkeypatch):
    from sessions_app.rollout import lease as locks

    async def turn(**kwargs):
        raise locks.LeaseLost("the lease on the session was lost")

    monkeypatch.setattr(fleet, "arun_turn", turn)
    claimed_at = time.time()
    fleet.claim_due_runs(now=claimed_at)

    result = fleet.do_run_step(session_id=run.session_id, claimed_at=claimed_at)

    assert result.status == "busy" and "LeaseLost" in result.error
    run.refresh_from_db()
    assert run.status == SimulatorRun.Status.RUNNING and run.last_error == ""
    assert run.next_step_at.timestamp() <= time.time() + fleet.BUSY_RETRY_SECONDS  # not after CLAIM_SECONDS
