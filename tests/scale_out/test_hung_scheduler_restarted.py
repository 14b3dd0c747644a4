"""A hung scheduler is detected and restarted (issue 15): the scheduler touches its heartbeat file every round of its
loop (`simulate --scheduler --heartbeat-file`) and the watchdog (`watchdog --scheduler-heartbeat`) restarts it
through supervisord when the file goes stale. The test runs the two programs as scripts/scale-out configures them,
under supervisord, and hangs the running scheduler the way a stuck database hangs it: a lock on the session table
that its housekeeping query waits for. The process stays up, so supervisord alone never notices; the watchdog
restarts it (a new pid, "restarting scheduler" in its log), and once the database answers again the new scheduler
beats. test_supervised_fleet.py runs scripts/scale-out itself with these arguments. About 20 s on an idle
machine (two process starts and a few 1 s watchdog rounds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from compactweb.watchdog import supervisor_proxy
from tests.scale_out.processes import ROOT, child_env, database_env, free_port
from tests.scale_out.test_redis_restart import start_redis, wait_until
from tests.scale_out.test_supervised_fleet import running, tails

DEADLINE_SECONDS = 90  # per wait; a start of Django takes 3-5 s on an idle machine, a minute on a loaded one
HEARTBEAT_MAX_AGE = 3


def heartbeat_age(path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def supervisord_conf(run_dir, beat) -> str:
    programs = {
        "scheduler": f"{sys.executable} manage.py simulate --scheduler --heartbeat-file {beat}",
        "watchdog": f"{sys.executable} manage.py watchdog --supervisor-socket {run_dir / 'supervisor.sock'} "
                    f"--scheduler-heartbeat {beat} --interval 1 --grace 3 --heartbeat-max-age {HEARTBEAT_MAX_AGE}",
    }
    conf = [
        f"[supervisord]\nnodaemon=true\nlogfile={run_dir / 'supervisord.log'}\npidfile={run_dir / 'supervisord.pid'}",
        f"[unix_http_server]\nfile={run_dir / 'supervisor.sock'}\nchmod=0700",
        "[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
    ]
    for name, command in programs.items():
        # The watchdog starts once the scheduler beats: on a loaded machine a start can outlast its grace.
        autostart = "false" if name == "watchdog" else "true"
        conf.append(f"[program:{name}]\ncommand={command}\ndirectory={ROOT}\nautostart={autostart}\n"
                    f"autorestart=true\nstartsecs=1\nstopwaitsecs=5\nredirect_stderr=true\n"
                    f"stdout_logfile={run_dir / (name + '.log')}")
    return "\n\n".join(conf) + "\n"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_scheduler_that_stopped_beating_is_restarted_by_the_watchdog(on_postgresql, tmp_path):
    redis_port = free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    env = {**child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path),
           "PYTHONUNBUFFERED": "1"}
    run_dir = tmp_path / "supervised"
    run_dir.mkdir()
    beat = run_dir / "scheduler.heartbeat"
    (run_dir / "supervisord.conf").write_text(supervisord_conf(run_dir, beat))
    redis_server = start_redis(redis_port, tmp_path)
    supervisord = lock = None
    try:
        supervisord = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "supervisord"), "-n", "-c", str(run_dir / "supervisord.conf")],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        wait_until(lambda: (run_dir / "supervisor.sock").exists() or supervisord.poll() is not None,
                   "supervisord to start", timeout=DEADLINE_SECONDS)
        assert supervisord.poll() is None, tails(run_dir)
        supervisor = supervisor_proxy(str(run_dir / "supervisor.sock"))
        wait_until(lambda: running(supervisor, "scheduler") and heartbeat_age(beat) < 1,
                   f"the scheduler to beat\n{tails(run_dir)}", timeout=DEADLINE_SECONDS)
        hung_pid = supervisor.getProcessInfo("scheduler")["pid"]
        supervisor.startProcess("watchdog", True)
        wait_until(lambda: "watching scheduler" in (run_dir / "watchdog.log").read_text(),
                   f"the watchdog to start\n{tails(run_dir)}", timeout=DEADLINE_SECONDS)
        assert supervisor.getProcessInfo("scheduler")["pid"] == hung_pid  # a beating scheduler is left alone

        # Hang it: its next housekeeping query waits for this lock; the process stays up and stops beating.
        lock = psycopg.connect(database_env()["DATABASE_URL"].replace("postgres://", "postgresql://", 1))
        lock.execute("LOCK TABLE sessions_app_session IN ACCESS EXCLUSIVE MODE")
        wait_until(lambda: heartbeat_age(beat) > HEARTBEAT_MAX_AGE, f"the scheduler to hang\n{tails(run_dir)}",
                   timeout=DEADLINE_SECONDS)
        assert supervisor.getProcessInfo("scheduler")["pid"] == hung_pid  # supervisord alone sees nothing wrong

        wait_until(lambda: (running(supervisor, "scheduler") or {}).get("pid", hung_pid) != hung_pid,
                   f"the watchdog to restart the scheduler\n{tails(run_dir)}", timeout=DEADLINE_SECONDS)
        # The new scheduler needs a few seconds to start: stop the watchdog so it judges no start-up, and let the
        # database answer again.
        supervisor.stopProcess("watchdog", True)
        lock.rollback()
        wait_until(lambda: heartbeat_age(beat) < 1, f"the new scheduler to beat\n{tails(run_dir)}",
                   timeout=DEADLINE_SECONDS)
        watchdog_log = (run_dir / "watchdog.log").read_text()
    finally:
        if lock is not None:
            lock.close()
        if supervisord is not None and supervisord.poll() is None:
            os.kill(supervisord.pid, signal.SIGTERM)
            try:
                supervisord.wait(timeout=30)
            except subprocess.TimeoutExpired:
                supervisord.kill()
                supervisord.wait(timeout=10)
        redis_server.terminate()
        redis_server.wait(timeout=10)

    assert "scheduler failed its liveness check (3 of 3)" in watchdog_log
    assert "restarting scheduler" in watchdog_log
