"""Two faults at once, a mix the suite had not run (issue 42): PostgreSQL is cut while a compacting fleet steps, and
during the cut the worker in the middle of a compaction is SIGKILLed. The existing tests cut the database with no
worker dying (test_database_outage.py) and kill a worker mid-compaction with the database up
(test_worker_killed_mid_compaction.py); here the dying worker cannot even reach the database to renew its lease or
record anything, and the other worker's steps are cut at the same time.

A looping fleet with a 4,000-token window (compactions every few turns) runs on one prefork worker; a second worker
(solo, on a private queue, so the test knows which one holds the compaction) runs a manual compaction of another
session whose simulated model answers after SLOW_SECONDS. Both workers and the scheduler reach the test database
through a TCP proxy (tests/scale_out/tcp_proxy.py). Once the compaction runs, the proxy is cut; two seconds later
that worker is killed; the database returns after OUTAGE_SECONDS. Then: every fleet session steps again within
RESUME_SECONDS of the return; the killed compaction left the history as it was, and once its lease (a short TTL)
ran out the next compaction takes the session over, succeeds, and marks the dead attempt interrupted; and the
fault suite's checker (tests/scale_out/checks.py) finds 0 lines lost or duplicated, 0 turns without an end and 0
deadlocks over every session of the run.

Nightly (`scripts/nightly scale`, `-m nightly`): two worker starts, a 10 s cut and the resumption, about a minute on
an idle machine, more than CI's services pass gives one test.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from celery import Celery

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt
from compaction_app.records import STALE_ATTEMPT_MESSAGE
from sessions_app.compactions.services import do_compact_session
from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine, Session
from tests.scale_out.checks import (
    assert_fault_run_clean,
    database_deadlocks,
    logs_under,
    seconds_until_each_steps,
    stepped_since,
)
from tests.scale_out.processes import (
    child_env,
    free_port,
    send_compaction_job,
    start_scheduler,
    start_worker,
    stop,
    wait_for_log,
)
from tests.scale_out.tcp_proxy import TcpProxy
from tests.scale_out.test_redis_restart import now, start_redis, wait_until
from tests.scale_out.test_worker_killed_mid_compaction import history, lease_of

FLEET_SIZE = 3
TURNS_PER_MINUTE = 60
WINDOW = 4_000  # tokens: the fleet compacts every few turns, so compactions are in flight when the cut comes
SLOW_SECONDS = 30  # the killed compaction's model call: it is killed well inside it
TTL_SECONDS = 4
OUTAGE_SECONDS = 10
KILL_AFTER_CUT_SECONDS = 2
RESUME_SECONDS = 15  # as for a plain cut: every session steps again this soon after the database returns
DEADLINE_SECONDS = 120  # per wait, for process starts on a loaded machine


@pytest.mark.nightly
@pytest.mark.services
@pytest.mark.timeout(900)
@pytest.mark.django_db(transaction=True)
def test_a_database_cut_while_a_worker_dies_mid_compaction_loses_and_duplicates_nothing(
    on_postgresql, provider, policy, make_session, tmp_path
):
    redis_port = free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    db = on_postgresql.settings_dict
    proxy = TcpProxy(upstream_host=db["HOST"] or "127.0.0.1", upstream_port=int(db["PORT"] or 5432)).start()
    env = child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path)
    env["DATABASE_URL"] = env["DATABASE_URL"].replace(f":{db['PORT'] or 5432}/", f":{proxy.port}/")
    env["COMPACTWEB_LEASE_TTL_SECONDS"] = str(TTL_SECONDS)
    deadlocks_before = database_deadlocks()
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=FLEET_SIZE, provider=provider, policy=policy,
                                turns_per_minute=TURNS_PER_MINUTE, loop=True, seed=53, context_window=WINDOW)
    fleet_ids = [run.session_id for run in runs]
    slow = make_session(items=[user_message("collect the deploy logs"), user_message("find the failing step")])
    Session.objects.filter(pk=slow.pk).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    before = history(slow.pk)
    queue = f"compactweb-test-{uuid.uuid4().hex[:8]}"
    redis_server = start_redis(redis_port, tmp_path)
    broker = Celery("compactweb-test", broker=f"{own_redis}/1", set_as_current=False)
    processes: list = []
    doomed = None
    try:
        fleet_worker = start_worker(queue="celery", env=env, log=tmp_path / "worker.log", pool="prefork",
                                    concurrency=2)
        processes.append(fleet_worker)
        doomed = start_worker(queue=queue, env=env, log=tmp_path / "doomed-worker.log")
        wait_for_log(fleet_worker, tmp_path / "worker.log", "ready", timeout=DEADLINE_SECONDS)
        wait_for_log(doomed, tmp_path / "doomed-worker.log", "ready", timeout=DEADLINE_SECONDS)
        processes.append(start_scheduler(env=env, log=tmp_path / "scheduler.log",
                                         heartbeat=tmp_path / "scheduler.heartbeat"))
        started = now()
        wait_until(lambda: all(stepped_since(s, started) for s in fleet_ids), "every fleet session to step",
                   timeout=DEADLINE_SECONDS)
        # The fleet compacts by now (its window is small), so the cut comes while it keeps compacting.
        wait_until(lambda: RolloutLine.objects.filter(session_id__in=fleet_ids, kind="compacted").exists(),
                   "the fleet to compact", timeout=DEADLINE_SECONDS)

        send_compaction_job(broker, session_id=slow.pk, queue=queue)
        wait_until(lambda: CompactionAttempt.objects.filter(session=slow, status="running").exists(),
                   "the slow compaction to start", timeout=DEADLINE_SECONDS)
        proxy.cut()
        cut_clock = time.monotonic()
        time.sleep(KILL_AFTER_CUT_SECONDS)
        stop(doomed, sig=signal.SIGKILL)
        assert doomed.returncode == -signal.SIGKILL
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - cut_clock)))
        proxy.restore()
        back_at, back_clock = now(), time.monotonic()

        resumed_after = seconds_until_each_steps(fleet_ids, since=back_at, since_clock=back_clock,
                                                 timeout=DEADLINE_SECONDS, what="fleet sessions")
        assert all(process.poll() is None for process in processes)  # the fleet's worker and the scheduler live on

        # Nothing of the killed compaction reached the history; its lease runs out by itself (no process is left
        # to end it), the scheduler's housekeeping (or the next compaction) ends the dead attempt as interrupted,
        # and the next compaction takes the session over.
        assert history(slow.pk) == before
        wait_until(lambda: lease_of(slow.pk)[0] == "" or lease_of(slow.pk)[1] < now(),
                   "the killed worker's lease to run out", timeout=DEADLINE_SECONDS)
        Session.objects.filter(pk=slow.pk).update(fault_injection={})
        compaction = do_compact_session(session_id=slow.pk, strategy="local")
        dead = CompactionAttempt.objects.exclude(compaction=compaction).get(session=slow)
        assert dead.status == "interrupted" and dead.error_message == STALE_ATTEMPT_MESSAGE
        assert dead.completed_at is not None and dead.compaction_id is None
        assert list(Compaction.objects.filter(session=slow)) == [compaction]
        after = history(slow.pk)
        assert after["lines"][: len(before["lines"])] == before["lines"]  # appended to, never rewritten
        assert RolloutLine.objects.filter(session=slow, kind="compacted").count() == 1

        fleet.do_stop_run()
        wait_until(lambda: not Session.objects.filter(pk__in=fleet_ids).exclude(lease_holder="").exists(),
                   "the steps in flight to finish", timeout=DEADLINE_SECONDS)
    finally:
        if doomed is not None:
            stop(doomed, sig=signal.SIGKILL)
        for process in reversed(processes):
            stop(process)
        broker.close()
        stop(redis_server)  # the run's own Redis: its queues go with it
        proxy.close()

    checked = assert_fault_run_clean([*fleet_ids, slow.pk], logs=logs_under(tmp_path),
                                     deadlocks_before=deadlocks_before, dump_to=tmp_path / "rollouts")
    print(f"database cut + worker killed mid-compaction: every fleet session stepped again {resumed_after:.1f} s "
          f"after the database returned; {checked}")
    assert resumed_after <= RESUME_SECONDS
    assert checked["compactions"] >= 2  # the fleet's own and the one taken over
