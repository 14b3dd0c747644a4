"""The simulator's scheduler: in-process steps with bounded concurrency, or Celery tasks with a broker."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from sessions_app.fleet import runtime as fleet
from sessions_app.fleet import scheduler
from sessions_app.fleet.scheduler import Scheduler
from sessions_app.models import RolloutLine, SimulatorRun

pytestmark = pytest.mark.django_db


def start(provider, policy, count=1, **kwargs):
    return fleet.do_start_fleet(scenario="many-short-turns", count=count, provider=provider, policy=policy, **kwargs)


def test_run_until_idle_steps_every_run_until_done_never_exceeding_the_concurrency(provider, policy):
    runs = start(provider, policy, count=5)
    in_flight, peak, calls = 0, 0, []

    def advance(session_id: int) -> None:
        run = SimulatorRun.objects.get(session_id=session_id)
        done = run.steps_done + 1
        status = SimulatorRun.Status.FINISHED if done == 2 else SimulatorRun.Status.RUNNING
        SimulatorRun.objects.filter(pk=run.pk).update(steps_done=done, status=status,
                                                      next_step_at=fleet._dt(0.0))

    async def fake_step(*, session_id: int):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        calls.append(session_id)
        await asyncio.sleep(0.01)
        await sync_to_async(advance)(session_id)
        in_flight -= 1
        return fleet.StepResult(session_id, "ran")

    sched = Scheduler(concurrency=2, poll_seconds=0.01, inline=True, step=fake_step)
    steps = async_to_sync(sched.run_until_idle)(timeout=10)

    assert steps == 10 and peak == 2
    assert sorted(calls) == sorted([r.session_id for r in runs] * 2)
    assert set(SimulatorRun.objects.values_list("status", flat=True)) == {"finished"}


def test_inline_scheduler_runs_real_turns(provider, policy):
    run = start(provider, policy)[0]

    steps = async_to_sync(Scheduler(concurrency=2, poll_seconds=0.01, inline=True).run_until_idle)(max_steps=2)

    assert steps == 2
    run.refresh_from_db()
    assert run.steps_done == 2 and run.state["position"] == 2
    assert RolloutLine.objects.filter(session_id=run.session_id, kind="turn_context",
                                      payload__has_key="step").count() == 2


def test_with_a_broker_the_scheduler_enqueues_one_task_per_due_step(provider, policy, monkeypatch):
    runs = start(provider, policy, count=3)
    sent = []
    from sessions_app.fleet import tasks

    monkeypatch.setattr(tasks.run_simulator_step, "apply_async", lambda kwargs, **options: sent.append(kwargs))
    sched = Scheduler(inline=False)

    assert async_to_sync(sched.tick)() == 3
    assert sorted(k["session_id"] for k in sent) == sorted(r.session_id for r in runs)
    assert async_to_sync(sched.tick)() == 0  # claimed: not sent twice


def test_steps_the_broker_refused_are_due_again_at_the_next_tick(provider, policy, monkeypatch):
    """A broker that is down (a Redis restart) must not leave claimed runs stalled for CLAIM_SECONDS."""
    from kombu.exceptions import OperationalError

    from sessions_app.fleet import tasks

    runs = start(provider, policy, count=3)
    now = time.time()
    sent = []

    def refuse_after_one(kwargs, **options):
        if sent:
            raise OperationalError("Error 111 connecting to the broker. Connection refused.")
        sent.append(kwargs)

    monkeypatch.setattr(tasks.run_simulator_step, "apply_async", refuse_after_one)
    with pytest.raises(OperationalError):
        scheduler.enqueue_due_steps(now=now)
    monkeypatch.setattr(tasks.run_simulator_step, "apply_async", lambda kwargs, **options: sent.append(kwargs))

    retried = scheduler.enqueue_due_steps(now=now + 0.5)

    assert sorted(retried + [sent[0]["session_id"]]) == sorted(r.session_id for r in runs)
    assert len(sent) == 3  # the one sent before the failure is not sent again


def test_steps_sent_before_a_broker_outage_are_offered_again_when_it_returns(provider, policy, monkeypatch):
    """A step sent just before the broker went away may have been lost with it: when the broker answers again,
    every such step that has not run is due at once, not after its claim's CLAIM_SECONDS."""
    from kombu.exceptions import OperationalError

    from compactweb import health
    from sessions_app.fleet import tasks

    lost, ran = start(provider, policy, count=2)
    sent = []
    monkeypatch.setattr(tasks.run_simulator_step, "apply_async", lambda kwargs, **options: sent.append(kwargs))
    clock = [time.time()]
    sched = Scheduler(inline=False, clock=lambda: clock[0])
    assert async_to_sync(sched.tick)() == 2
    # One of the two steps ran (its run is rescheduled by the step); the other's task vanished with the broker.
    SimulatorRun.objects.filter(pk=ran.pk).update(next_step_at=fleet._dt(clock[0] + 30))

    def broker_down():
        raise OperationalError("Error 111 connecting to the broker. Connection refused.")

    monkeypatch.setattr(health, "check_broker", broker_down)
    clock[0] += scheduler.HOUSEKEEPING_SECONDS
    async_to_sync(sched.housekeeping)()
    assert sched.broker_down
    assert async_to_sync(sched.tick)() == 0  # nothing due: the lost step still looks claimed

    monkeypatch.setattr(health, "check_broker", lambda: health.OK)
    clock[0] += scheduler.HOUSEKEEPING_SECONDS
    async_to_sync(sched.housekeeping)()

    assert not sched.broker_down
    assert async_to_sync(sched.tick)() == 1
    assert sent[-1] == {"session_id": lost.session_id, "claimed_at": clock[0]}  # a claim of its own
    ran.refresh_from_db()
    assert ran.next_step_at == fleet._dt(clock[0] - 2 * scheduler.HOUSEKEEPING_SECONDS + 30)  # left alone


def test_housekeeping_frees_a_dead_steps_lease_makes_its_run_due_and_tells_the_pages(provider, policy,
                                                                                      monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import Session
    from sessions_app.rollout import lease as locks

    run = start(provider, policy)[0]
    published = []
    monkeypatch.setattr(scheduler, "publish_transient", lambda **kwargs: published.append(kwargs))
    assert fleet.claim_due_runs() == [run.session_id]  # a worker took the step, took the lease, and died
    locks.acquire(session_id=run.session_id, purpose=fleet.STEP_LEASE_PURPOSE)
    Session.objects.filter(pk=run.session_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    async_to_sync(Scheduler(inline=True).housekeeping)()

    assert Session.objects.get(pk=run.session_id).lease_holder == ""
    assert fleet.claim_due_runs() == [run.session_id]  # due again now, not after CLAIM_SECONDS
    assert [p["kind"] for p in published] == [scheduler.LEASE_REAPED]


def test_the_celery_step_task_runs_one_turn(provider, policy):
    from sessions_app.fleet.tasks import run_simulator_step

    run = start(provider, policy)[0]

    assert run_simulator_step(run.session_id) == "ran"
    assert run_simulator_step(987654) == "skipped"
    run.refresh_from_db()
    assert run.steps_done == 1


def test_the_background_scheduler_starts_only_when_asked():
    assert scheduler.start_from_environment({}) is None
    assert scheduler.start_from_environment({scheduler.ENV_FLAG: "0"}) is None


def test_app_loading_never_starts_the_scheduler_even_when_the_flag_is_set(monkeypatch):
    """migrate, shell and workers load the apps; only the dashboard's ASGI startup (or a command) runs it."""
    from django.apps import apps

    started = []
    monkeypatch.setenv(scheduler.ENV_FLAG, "1")
    monkeypatch.setattr(scheduler, "start_from_environment", lambda environ=None: started.append(environ))
    apps.get_app_config("sessions_app").ready()
    assert started == []


def test_a_step_for_a_session_without_a_run_changes_nothing(session):
    assert fleet.do_run_step(session_id=session.pk).status == "skipped"
    session.refresh_from_db()
    assert session.state == "idle" and session.lease_holder == ""


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_touches_its_heartbeat_file_every_round(tmp_path):
    import threading

    beat = tmp_path / "scheduler.heartbeat"
    stop = threading.Event()
    rounds = []

    sched = Scheduler(inline=True, poll_seconds=0.01, heartbeat_path=beat)
    real_beat = sched.beat

    def counting_beat():
        real_beat()
        rounds.append(beat.stat().st_mtime_ns)
        if len(rounds) == 3:
            stop.set()

    sched.beat = counting_beat
    async_to_sync(sched.run)(stop)

    assert len(rounds) == 3 and beat.exists()
    assert rounds == sorted(rounds)


def test_in_a_scale_out_set_the_scheduler_says_once_that_it_is_up_after_its_first_beat(tmp_path, monkeypatch):
    """The set's starter waits for this (compactweb.set_start): the heartbeat file may be a dead set's scheduler's."""
    import os

    from compactweb import set_start

    monkeypatch.setenv(set_start.RUN_DIR_ENV, str(tmp_path))
    sched = Scheduler(inline=True, heartbeat_path=tmp_path / "scheduler.heartbeat")
    assert not (tmp_path / set_start.READY_DIR).exists()
    sched.beat()
    marker = tmp_path / set_start.READY_DIR / f"scheduler-{os.getpid()}"
    assert marker.exists()
    marker.unlink()
    sched.beat()
    assert not marker.exists()  # once
