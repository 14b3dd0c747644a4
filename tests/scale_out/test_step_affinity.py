"""Session affinity on real workers (issue 34): a session's steps go to the worker that wins it while that worker
beats, and to the other when it stops, with no step lost and none run twice. Two solo workers (a and b) and the
real scheduler share PostgreSQL and Redis; looping sessions step twice a second. Worker a is frozen (SIGSTOP: its
heartbeat lapses with its sessions' steps queued), its sessions go on stepping on b (but one a froze mid-step,
whose lease a still holds: the freeze is kept well inside the lease's TTL, since a holder that outlives its lease
fails its step); a is thawed and takes its late messages, which run nothing since their claims were handed out
again; a is then SIGKILLed mid-run and b takes over again (a session a held steps once its lease expires). Every session's scenario steps ran once each, in order, the rollouts contiguous. About a minute."""

from __future__ import annotations

import signal
import socket

import pytest

from compactweb import worker_affinity
from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine, SimulatorRun
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks, logs_under
from tests.scale_out.processes import child_env, start_scheduler, start_worker, stop, wait_for_log
from tests.scale_out.test_redis_restart import wait_until

DEADLINE_SECONDS = 90
SESSIONS = 6
HEARTBEAT_TTL = "3"
LEASE_TTL = "30"  # the default: a freeze of a few seconds stays well inside it
READY = "takes its sessions' steps on queue"


def split_names(session_ids: list[int]) -> tuple[str, str]:
    """Worker names (as Celery's `-n <queue>@%h` makes them) under which each worker wins at least two sessions."""
    host = socket.gethostname()
    for n in range(100):
        a, b = f"affinity-a{n}@{host}", f"affinity-b{n}@{host}"
        won = [worker_affinity.rendezvous(s, [a, b]) for s in session_ids]
        if won.count(a) >= 2 and won.count(b) >= 2:
            return a, b
    raise AssertionError("no pair of names splits the sessions")


def steps_done(session_ids) -> dict[int, int]:
    return dict(SimulatorRun.objects.filter(session_id__in=session_ids).values_list("session_id", "steps_done"))


def stepped_since(before: dict[int, int], session_ids, at_least: int, *, but: int = 0) -> bool:
    """Whether every session (all `but` this many) ran `at_least` steps since `before`."""
    now = steps_done(session_ids)
    return sum(now[s] >= before[s] + at_least for s in session_ids) >= len(session_ids) - but


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_frozen_then_killed_worker_loses_no_step_and_its_late_messages_run_nothing(
    on_postgresql, provider, policy, redis_url, tmp_path
):
    import redis

    deadlocks_before = database_deadlocks()
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=SESSIONS, provider=provider, policy=policy,
                                turns_per_minute=120, loop=True, seed=34)
    session_ids = [r.session_id for r in runs]
    a, b = split_names(session_ids)
    of_a = [s for s in session_ids if worker_affinity.rendezvous(s, [a, b]) == a]
    env = {**child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path),
           "COMPACTWEB_WORKER_HEARTBEAT_TTL": HEARTBEAT_TTL, "COMPACTWEB_LEASE_TTL_SECONDS": LEASE_TTL,
           "COMPACTWEB_STEP_AFFINITY": "1"}
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b", "a-again", "scheduler")}
    client = redis.Redis.from_url(redis_url)
    worker_a = worker_b = scheduler = None
    try:
        worker_a = start_worker(queue=a.split("@")[0], env=env, log=logs["a"])
        worker_b = start_worker(queue=b.split("@")[0], env=env, log=logs["b"])
        wait_for_log(worker_a, logs["a"], READY, timeout=DEADLINE_SECONDS)
        wait_for_log(worker_b, logs["b"], READY, timeout=DEADLINE_SECONDS)
        scheduler = start_scheduler(env=env, log=logs["scheduler"])
        wait_until(lambda: stepped_since(dict.fromkeys(session_ids, 0), session_ids, 2),
                   f"every session to step\n{logs['scheduler'].read_text()[-3000:]}")
        assert "'ran'" in logs["a"].read_text() and "'ran'" in logs["b"].read_text()  # both took their share

        worker_a.send_signal(signal.SIGSTOP)  # frozen: its heartbeat lapses, its sessions' steps wait in its queue
        frozen = steps_done(session_ids)
        wait_until(lambda: f"worker {a} stopped beating" in logs["scheduler"].read_text(),
                   f"the scheduler to notice a\n{logs['scheduler'].read_text()[-3000:]}")
        wait_until(lambda: stepped_since(frozen, of_a, 2, but=1), "a's sessions to step on b")
        late = client.llen(worker_affinity.queue_of(a).name)

        worker_a.send_signal(signal.SIGCONT)  # back: it beats again and takes its late messages
        wait_until(lambda: client.llen(worker_affinity.queue_of(a).name) == 0, "a to take its late messages")
        thawed = steps_done(session_ids)
        wait_until(lambda: stepped_since(thawed, session_ids, 2), "every session to step after a came back")

        worker_a.send_signal(signal.SIGKILL)  # dead for good, maybe mid-step (its lease then expires)
        worker_a.wait(timeout=10)
        killed = steps_done(session_ids)
        wait_until(lambda: stepped_since(killed, of_a, 2), "a's sessions to step on b after a died")
        fleet.do_stop_run()
        stop(scheduler)
        scheduler = None
        stop(worker_b)
        worker_b = None
    finally:
        for process in (worker_a, worker_b, scheduler):
            if process is not None:
                if process is worker_a:
                    process.send_signal(signal.SIGCONT)
                stop(process, sig=signal.SIGKILL)
        client.delete(worker_affinity.queue_of(a).name, worker_affinity.queue_of(b).name)
        client.close()

    assert late >= 1  # steps were queued to a while it was frozen, and ran on b instead
    assert "'skipped'" in logs["a"].read_text() or "'busy'" in logs["a"].read_text()  # late: ran nothing
    for run in SimulatorRun.objects.filter(session_id__in=session_ids):
        contexts = RolloutLine.objects.filter(session_id=run.session_id, kind="turn_context", payload__has_key="step")
        steps = [p["step"] for p in contexts.order_by("seq").values_list("payload", flat=True)]
        assert steps == list(range(len(steps))), (run.session_id, steps)  # each step once, none lost
        assert run.steps_done == len(steps)
        seqs = list(RolloutLine.objects.filter(session_id=run.session_id).order_by("seq")
                    .values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1))
    print(assert_fault_run_clean(session_ids, logs=logs_under(tmp_path), deadlocks_before=deadlocks_before))
