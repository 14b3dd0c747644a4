"""compactweb.orphans (issue 31): the processes a killed supervisord left serving are found by the run directory
their environment carries, the top ones get TERM (a Celery worker's warm shutdown lets its task finish; its
children are left to it), what ignores TERM is KILLed at once instead of after the wait (issue 42), and another set's
processes are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from compactweb import orphans

PARENT = """
import signal, subprocess, sys, time
log = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c", '''
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: open(sys.argv[1], "a").write("child got TERM\\\\n"))
time.sleep(120)
''', log])

def warm_shutdown(*args):
    time.sleep(0.5)  # the running task finishes
    open(log, "a").write("task finished\\n")
    child.kill()
    child.wait()
    sys.exit(0)

signal.signal(signal.SIGTERM, warm_shutdown)
open(log, "a").write("ready\\n")
time.sleep(120)
"""
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(__import__('sys').argv[1], 'w'); time.sleep(120)"


def spawn(code: str, log, run_dir: str) -> subprocess.Popen:
    env = {**os.environ, orphans.MARKER: run_dir}
    return subprocess.Popen([sys.executable, "-c", code, str(log)], env=env)


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_orphans_of_a_set_are_stopped_warm_first_and_other_sets_are_left_alone(tmp_path):
    run_dir, other_dir = str(tmp_path / "set"), str(tmp_path / "other-set")
    log, stubborn_log, other_log = tmp_path / "worker.log", tmp_path / "stubborn.log", tmp_path / "other.log"
    worker = spawn(PARENT, log, run_dir)
    stubborn = spawn(STUBBORN, stubborn_log, run_dir)
    other = spawn(STUBBORN, other_log, other_dir)
    try:
        wait_for(lambda: log.exists() and "ready" in log.read_text() and stubborn_log.exists() and other_log.exists())
        wait_for(lambda: len(orphans.marked_processes(run_dir)) == 3)  # the worker, its child, the stubborn one
        found = orphans.marked_processes(run_dir)

        # A wait no run reaches: the stop ends when the last process does, not when the wait runs out.
        stopped = orphans.stop_orphans(run_dir, wait=3600)

        assert stopped == sorted(found) and worker.pid in stopped and stubborn.pid in stopped
        assert worker.wait(timeout=10) == 0  # it shut down by itself, after its task
        assert stubborn.wait(timeout=10) == -9  # ignored TERM: killed at once
        assert log.read_text().splitlines() == ["ready", "task finished"]  # its child never got TERM from us
        assert orphans.marked_processes(run_dir) == {}
        assert other.poll() is None and orphans.marked_processes(other_dir) == {other.pid: os.getpid()}
    finally:
        for process in (worker, stubborn, other):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_nothing_to_stop_returns_at_once():
    clock = iter(range(100))
    assert orphans.stop_orphans("/nowhere", find=lambda run_dir: {}, clock=lambda: next(clock),
                                sleep=lambda s: None) == []
