"""A killed supervisor, and the cold start after it on a busy host (issue 42). scripts/scale-out runs a looping
fleet; supervisord is SIGKILLed (its programs serve on, unsupervised) and the launcher is started again at once, as
a service manager restarts it. The database needs no change, so the launcher hands over: the dead set's workers,
scheduler and web processes serve on while the new set starts (only its watchdog goes at once), and the new set's
starter stops them once the new set's own worker and scheduler are up, then starts the new web processes. Steps
never stop for longer than COLD_START_SECONDS (60) from the kill until the new set serves: the goal is a set that
serves steps within a minute of a supervisor kill. COMPACTWEB_CPU_HOG=N runs N busy processes beside the set from
before the kill until the new set serves (the "load 16" host of issue 42; the run prints the load average it saw,
the longest time without a step, and when the new set took over and served). Afterwards the fault suite's checker
(tests/scale_out/checks.py) finds 0 lines lost or duplicated, 0 turns without an end and 0 deadlocks.

Nightly (`scripts/nightly scale`, `-m nightly`): two whole starts of the set, too long for a push's PostgreSQL
pass. The measured figures are in docs/benchmarks.md ("Cold start after a supervisor kill").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest

from compactweb import set_start
from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine, Session
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks, logs_under
from tests.scale_out.processes import ROOT, child_env, free_port
from tests.scale_out.test_redis_restart import now as utc_now
from tests.scale_out.test_redis_restart import start_redis, steps_between
from tests.scale_out.test_supervised_fleet import answers, drop_role, launcher_waits, stop_set, tails

FLEET_SIZE = 4
TURNS_PER_MINUTE = 60
COLD_START_SECONDS = 60  # the goal: after a kill the set serves steps again within this (no longer gap)
HOGS = int(os.environ.get("COMPACTWEB_CPU_HOG", "0"))
LOAD_SETTLE_SECONDS = 60  # the hogs run this long before the kill, so the one-minute load average shows them
HOG = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    pass\n"


def longest_step_gap(session_ids, killed_at: datetime, taken_over_at: datetime) -> float:
    """The longest time in seconds without a scenario step in these sessions, from the last step before the kill
    to the first one after the new set took over."""
    times = sorted(RolloutLine.objects.filter(
        session_id__in=session_ids, kind="turn_context", payload__has_key="step",
        timestamp__gt=killed_at - timedelta(minutes=10)).values_list("timestamp", flat=True))
    start = max((t for t in times if t <= killed_at), default=killed_at)
    end = min(t for t in times if t > taken_over_at)
    window = [start, *(t for t in times if start < t <= end)]
    return max((b - a).total_seconds() for a, b in zip(window, window[1:], strict=False))


def launch(env: dict, port: int, log_path) -> subprocess.Popen:
    with open(log_path, "w") as out:
        return subprocess.Popen(
            [str(ROOT / "scripts" / "scale-out"), "--web", "2", "--workers", "2", "--port", str(port)],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )


@pytest.mark.nightly
@pytest.mark.services
@pytest.mark.timeout(1_500)
@pytest.mark.django_db(transaction=True)
def test_after_a_supervisor_kill_a_restarted_launcher_serves_steps_within_a_minute(on_postgresql, provider, policy,
                                                                                    tmp_path):
    redis_port, first_port = free_port(), free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    app_role = f"{os.environ.get('COMPACTWEB_TEST_ROLE_PREFIX', 'compactweb_test_')}cold_{os.getpid()}"
    env = {**child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path),
           "CELERY_CONCURRENCY": "1", "COMPACTWEB_APP_ROLE": app_role}
    run_dir = tmp_path / "scale-out"
    deadlocks_before = database_deadlocks()
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=FLEET_SIZE, provider=provider, policy=policy,
                                turns_per_minute=TURNS_PER_MINUTE, loop=True, seed=42)
    session_ids = [run.session_id for run in runs]
    redis_server = start_redis(redis_port, tmp_path)
    launcher = second = None
    hogs: list[subprocess.Popen] = []
    try:
        launcher = launch(env, first_port, tmp_path / "launcher.log")
        wait_until = launcher_waits(launcher, tmp_path / "launcher.log")
        wait_until(lambda: answers(first_port) and answers(first_port + 1), f"both web processes\n{tails(run_dir)}")
        started = utc_now()
        wait_until(lambda: steps_between(session_ids, started, None) >= FLEET_SIZE,
                   f"the fleet to step\n{tails(run_dir)}")
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(HOGS)]
        if hogs:
            time.sleep(LOAD_SETTLE_SECONDS)
        load_at_kill = os.getloadavg()

        start_log = run_dir / "start-web.log"
        starts_before = start_log.read_text().count("started web-")
        os.kill(int((run_dir / "supervisord.pid").read_text()), signal.SIGKILL)
        killed_at, kill_clock = utc_now(), time.monotonic()
        launcher.wait(timeout=30)  # the launcher became supervisord (exec): it is what was killed
        second = launch(env, first_port, tmp_path / "launcher-2.log")  # at once, as a service manager would
        wait_until = launcher_waits(second, tmp_path / "launcher-2.log")
        # The new set took over: its starter stopped what the dead set still ran and started the web programs.
        wait_until(lambda: start_log.read_text().count("started web-") > starts_before,
                   f"the new set to take over\n{tails(run_dir)}")
        taken_over_at, taken_over_after = utc_now(), time.monotonic() - kill_clock
        wait_until(lambda: steps_between(session_ids, taken_over_at, None) >= 1,
                   f"the new set to serve a step\n{tails(run_dir)}")
        serving_after = time.monotonic() - kill_clock
        gap = longest_step_gap(session_ids, killed_at, taken_over_at)
        load_after = os.getloadavg()
        for hog in hogs:
            hog.kill()
        print(f"cold start after a supervisor kill: the longest time without a step {gap:.1f} s; the new set took "
              f"over {taken_over_after:.1f} s after the kill and served a step {serving_after:.1f} s after it; "
              f"{HOGS} CPU hogs; load average at the kill {load_at_kill[0]:.1f}, when serving {load_after[0]:.1f}")
        wait_until(lambda: answers(first_port) and answers(first_port + 1), f"the new web processes\n{tails(run_dir)}")
        # The dead set's workers and scheduler are stopped after the take-over, a running step finishing first
        # (set_start.DEAD_WORKERS_WAIT_SECONDS at most); none is left serving, nor connected to the database.
        supervisord = int((run_dir / "supervisord.pid").read_text())
        wait_until(lambda: not set_start.previous_set_runs(run_dir, supervisord=supervisord),
                   f"the dead set to stop\n{tails(run_dir)}", timeout=set_start.DEAD_WORKERS_WAIT_SECONDS + 30)
        fleet.do_stop_run()
        wait_until(lambda: not Session.objects.filter(pk__in=session_ids).exclude(lease_holder="").exists(),
                   "the steps in flight to finish (or a dead step's lease to expire)")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        for process in (second, launcher):
            if process is not None:
                stop_set(process)
        stop_set(redis_server)
        drop_role(on_postgresql, app_role)

    print(assert_fault_run_clean(session_ids, logs=logs_under(tmp_path), deadlocks_before=deadlocks_before))
    assert gap <= COLD_START_SECONDS
