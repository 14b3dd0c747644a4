"""Session affinity of simulator steps (issue 34): each session's steps go to the live worker that wins it, and a
worker that stops beating loses no step: what was sent to it is offered again, and its late messages run nothing,
so every step runs exactly once."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync

from compactweb import worker_affinity
from sessions_app.fleet import runtime as fleet
from sessions_app.fleet import scheduler, tasks
from sessions_app.fleet.affinity import StepRouter
from sessions_app.fleet.scheduler import Scheduler
from sessions_app.models import RolloutLine, Session, SimulatorRun

pytestmark = pytest.mark.django_db

A, B = "a@h", "b@h"


class FakeRegistry:
    def __init__(self, *live: str) -> None:
        self.workers = list(live)
        self.failing = False

    def live(self) -> list[str]:
        if self.failing:
            raise ConnectionError("Redis does not answer")
        return sorted(self.workers)


def start(provider, policy, count=1, **kwargs):
    return fleet.do_start_fleet(scenario="many-short-turns", count=count, provider=provider, policy=policy, **kwargs)


@pytest.fixture
def sent(monkeypatch):
    messages = []
    monkeypatch.setattr(tasks.run_simulator_step, "apply_async",
                        lambda kwargs, **options: messages.append({**kwargs, **options, "queue": getattr(options.get("queue"), "name", None)}))
    return messages


def step_numbers(session_id: int) -> list[int]:
    return [p["step"] for p in RolloutLine.objects.filter(session_id=session_id, kind="turn_context",
                                                          payload__has_key="step")
            .order_by("seq").values_list("payload", flat=True)]


def test_each_step_goes_to_the_queue_of_the_worker_that_wins_its_session_with_its_claim(provider, policy, sent):
    runs = start(provider, policy, count=6)
    router = StepRouter(registry=FakeRegistry(A, B), enabled=True)
    now = time.time()

    tasks.enqueue_due_steps(now=now, router=router)

    by_session = {m["session_id"]: m for m in sent}
    assert set(by_session) == {r.session_id for r in runs}
    for session_id, message in by_session.items():
        owner = worker_affinity.rendezvous(session_id, [A, B])
        assert message["queue"] == worker_affinity.queue_of(owner).name
        assert message["claimed_at"] == now
        assert message["expires"] == fleet.claim_lapses_at(now)  # a message outliving its claim runs nothing


def test_steps_go_to_the_shared_queue_with_affinity_off_no_live_worker_or_redis_away(provider, policy, sent):
    start(provider, policy, count=2)
    off = StepRouter(registry=FakeRegistry(A), enabled=False)
    nobody = StepRouter(registry=FakeRegistry(), enabled=True)
    away = FakeRegistry(A)
    away.failing = True
    for i, router in enumerate((off, nobody, StepRouter(registry=away, enabled=True))):
        SimulatorRun.objects.update(next_step_at=fleet._dt(0))
        tasks.enqueue_due_steps(now=time.time() + i, router=router)
    assert len(sent) == 6 and not any(m["queue"] for m in sent)


def test_a_step_sent_with_a_claim_that_no_longer_stands_runs_nothing(provider, policy):
    (run,) = start(provider, policy)
    first = time.time()
    assert fleet.claim_due_runs(now=first) == [run.session_id]
    fleet.release_claims(session_ids=[run.session_id], now=first)  # offered again ...
    second = first + 1
    assert fleet.claim_due_runs(now=second) == [run.session_id]  # ... and claimed anew

    stale = tasks.run_simulator_step(run.session_id, claimed_at=first)
    current = tasks.run_simulator_step(run.session_id, claimed_at=second)
    again = tasks.run_simulator_step(run.session_id, claimed_at=second)  # the same message delivered twice

    assert (stale, current, again) == ("skipped", "ran", "skipped")
    assert step_numbers(run.session_id) == [0]
    assert Session.objects.get(pk=run.session_id).lease_holder == ""


def test_a_stale_step_that_finds_its_session_busy_leaves_the_current_claim_alone(provider, policy):
    (run,) = start(provider, policy)
    now = time.time()
    fleet.claim_due_runs(now=now)
    fleet._busy(run.session_id, now, claimed_at=now - 5)
    assert SimulatorRun.objects.get(pk=run.pk).next_step_at == fleet.claim_lapses_at(now)
    fleet._busy(run.session_id, now, claimed_at=now)  # the current claim's step retries soon
    assert SimulatorRun.objects.get(pk=run.pk).next_step_at == fleet._dt(now + fleet.BUSY_RETRY_SECONDS)


def test_a_worker_that_stops_beating_has_its_queued_steps_run_elsewhere_exactly_once(provider, policy, sent):
    # Paced at a turn a minute and started long ago: all due now, and a session that stepped is not due again.
    runs = start(provider, policy, count=8, turns_per_minute=1, now=time.time() - 120)
    registry = FakeRegistry(A, B)
    clock = [time.time()]
    sched = Scheduler(inline=False, clock=lambda: clock[0], router=StepRouter(registry=registry, enabled=True,
                                                                              clock=lambda: clock[0]))
    assert async_to_sync(sched.tick)() == 8
    on_a = [m for m in sent if m["queue"] == worker_affinity.queue_of(A).name]
    on_b = [m for m in sent if m["queue"] == worker_affinity.queue_of(B).name]
    assert on_a and on_b
    for message in on_b:  # b runs its steps; a's stay queued
        assert tasks.run_simulator_step(message["session_id"], claimed_at=message["claimed_at"]) == "ran"

    registry.workers.remove(A)  # a's heartbeat expired (killed, hung, cut off) with its steps still queued
    clock[0] += scheduler.HOUSEKEEPING_SECONDS
    async_to_sync(sched.housekeeping)()
    del sent[:]
    assert async_to_sync(sched.tick)() == len(on_a)  # a's steps are due again at once, not after CLAIM_SECONDS
    assert {m["session_id"] for m in sent} == {m["session_id"] for m in on_a}
    assert {m["queue"] for m in sent} == {worker_affinity.queue_of(B).name}
    for message in sent:
        assert tasks.run_simulator_step(message["session_id"], claimed_at=message["claimed_at"]) == "ran"
    for message in on_a:  # a comes back and takes its old messages: they run nothing
        assert tasks.run_simulator_step(message["session_id"], claimed_at=message["claimed_at"]) == "skipped"

    for run in runs:
        assert step_numbers(run.session_id) == [0]  # every session's first step, once
    assert set(SimulatorRun.objects.values_list("steps_done", flat=True)) == {1}


def test_a_redis_hiccup_is_not_a_dead_worker(provider, policy, sent):
    start(provider, policy, count=4)
    registry = FakeRegistry(A)
    clock = [time.time()]
    sched = Scheduler(inline=False, clock=lambda: clock[0], router=StepRouter(registry=registry, enabled=True,
                                                                              clock=lambda: clock[0]))
    assert async_to_sync(sched.tick)() == 4
    registry.failing = True
    clock[0] += scheduler.HOUSEKEEPING_SECONDS
    async_to_sync(sched.housekeeping)()
    assert async_to_sync(sched.tick)() == 0  # nothing offered again: the steps may still run on a
