"""Concurrent compactions never deadlock (issue 42), at scale: scripts/scale-out (two web processes, two workers of
two processes each, the scheduler) runs a looping fleet of SCALE_SESSIONS sessions (default 40) with a
4,000-token window, so nearly every few turns compact, for SCALE_MINUTES (default 5), and the fault suite's
checker (tests/scale_out/checks.py) finds 0 lines lost or duplicated, 0 turns without an end and 0 deadlocks
(PostgreSQL's own count for the database, and none in any process log). The run prints its figures (sessions,
turns, compactions, failed compaction attempts, deadlocks, duration).

Nightly (`scripts/nightly scale`, `-m nightly`): several minutes of two saturated cores, too long for a push.
Round four's run of this mix logged 135 deadlocks in 22 minutes and left 108 turns without an end.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from compaction_app.models import CompactionAttempt
from sessions_app.fleet import runtime as fleet
from sessions_app.models import Session
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks, logs_under
from tests.scale_out.processes import ROOT, child_env, free_port
from tests.scale_out.test_redis_restart import now as utc_now
from tests.scale_out.test_redis_restart import start_redis, steps_between
from tests.scale_out.test_supervised_fleet import answers, drop_role, launcher_waits, stop_set, tails

SESSIONS = int(os.environ.get("SCALE_SESSIONS", "40"))
MINUTES = float(os.environ.get("SCALE_MINUTES", "5"))
TURNS_PER_MINUTE = float(os.environ.get("SCALE_TURNS_PER_MINUTE", "10"))  # per session: more than two cores do
WINDOW = 4_000  # tokens: a compaction every few turns


def run_fleet_for(*, sessions: int, minutes: float, provider, policy, on_postgresql, tmp_path) -> dict:
    """Run the set with a looping fleet of `sessions` for `minutes`, stop it, check it; the run's figures."""
    redis_port, first_port = free_port(), free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    app_role = f"{os.environ.get('COMPACTWEB_TEST_ROLE_PREFIX', 'compactweb_test_')}scale_{os.getpid()}"
    env = {**child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path),
           "CELERY_CONCURRENCY": "2", "COMPACTWEB_APP_ROLE": app_role}
    run_dir = tmp_path / "scale-out"
    deadlocks_before = database_deadlocks()
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=sessions, provider=provider, policy=policy,
                                turns_per_minute=TURNS_PER_MINUTE, loop=True, seed=42, context_window=WINDOW)
    session_ids = [run.session_id for run in runs]
    redis_server = start_redis(redis_port, tmp_path)
    launcher = None
    try:
        with open(tmp_path / "launcher.log", "w") as out:
            launcher = subprocess.Popen(
                [str(ROOT / "scripts" / "scale-out"), "--web", "2", "--workers", "2", "--port", str(first_port)],
                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            )
        wait_until = launcher_waits(launcher, tmp_path / "launcher.log")
        wait_until(lambda: answers(first_port) and answers(first_port + 1), f"both web processes\n{tails(run_dir)}")
        started, clock = utc_now(), time.monotonic()
        wait_until(lambda: steps_between(session_ids, started, None) >= sessions,
                   f"the fleet to step\n{tails(run_dir)}")
        while time.monotonic() - clock < minutes * 60:
            assert launcher.poll() is None, tails(run_dir)
            time.sleep(2)
        fleet.do_stop_run()
        wait_until(lambda: not Session.objects.filter(pk__in=session_ids).exclude(lease_holder="").exists(),
                   "the steps in flight to finish")
        duration = time.monotonic() - clock
    finally:
        if launcher is not None:
            stop_set(launcher)
        stop_set(redis_server)
        drop_role(on_postgresql, app_role)

    checked = assert_fault_run_clean(session_ids, logs=logs_under(tmp_path), deadlocks_before=deadlocks_before,
                                     dump_to=tmp_path / "rollouts")
    attempts = CompactionAttempt.objects.filter(session_id__in=session_ids)
    figures = {**checked, "compaction_attempts": attempts.count(),
               "failed_attempts": attempts.exclude(status="completed").count(), "minutes": round(duration / 60, 1)}
    print(f"fleet at scale: {figures}")
    return figures


@pytest.mark.nightly
@pytest.mark.services
@pytest.mark.timeout(int(MINUTES * 60) + 1_200)
@pytest.mark.django_db(transaction=True)
def test_a_fleet_of_forty_compacting_sessions_runs_for_minutes_with_no_deadlock(on_postgresql, provider, policy,
                                                                                 tmp_path):
    figures = run_fleet_for(sessions=SESSIONS, minutes=MINUTES, provider=provider, policy=policy,
                            on_postgresql=on_postgresql, tmp_path=tmp_path)
    assert figures["compactions"] >= SESSIONS  # the small window did make it a run of many compactions
