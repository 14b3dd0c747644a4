"""compactweb.set_start (issue 42): a scale-out set's web processes and watchdog start once the step path is up (one
of this set's workers said it is ready and its scheduler beat), or after the bound anyway; first, in a hand-over,
what the dead set still runs is stopped, and nothing of this set; a process outside a set announces nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xmlrpc.client

import pytest

from compactweb import orphans, set_start

PROGRAMS = ["web-8001", "web-8002", "watchdog"]


class FakeSupervisor:
    def __init__(self, *, running=()):
        self.started: list[str] = []
        self.running = set(running)

    def startProcess(self, name, wait):  # noqa: N802 - supervisord's XML-RPC name
        if name in self.running:
            raise xmlrpc.client.Fault(set_start.ALREADY_STARTED, "ALREADY_STARTED")
        self.started.append(name)
        return True


class Clock:
    """A fake clock whose sleep runs `on_sleep` (the world changing while the starter waits)."""

    def __init__(self, on_sleep=lambda now: None):
        self.now, self.on_sleep = 0.0, on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.on_sleep(self.now)


def test_the_web_programs_start_only_once_a_worker_is_ready_and_the_scheduler_beats(tmp_path):
    supervisor = FakeSupervisor()
    seen_before_start = []

    def world(now):
        seen_before_start.append(list(supervisor.started))
        if now >= 3:
            set_start.announce_worker_ready(str(tmp_path))
        if now >= 5:
            set_start.announce_ready("scheduler", str(tmp_path))

    clock = Clock(world)
    ready = set_start.start_when_ready(tmp_path, PROGRAMS, supervisor=supervisor, clock=clock, sleep=clock.sleep,
                                       poll=0.5)
    assert ready is True
    assert supervisor.started == PROGRAMS
    assert clock.now == 5.0  # not before both were there
    assert all(started == [] for started in seen_before_start)


def test_a_worker_alone_or_a_scheduler_alone_is_not_the_step_path(tmp_path):
    worker = set_start.announce_worker_ready(str(tmp_path))
    assert not set_start.step_path_ready(tmp_path)
    (tmp_path / "scheduler.heartbeat").touch()  # a previous set's scheduler may still beat this file: not ours
    assert not set_start.step_path_ready(tmp_path)
    set_start.announce_ready("scheduler", str(tmp_path))
    assert set_start.step_path_ready(tmp_path)
    worker.unlink()
    assert not set_start.step_path_ready(tmp_path)


def test_the_web_programs_start_after_the_bound_when_no_worker_gets_ready(tmp_path):
    set_start.announce_ready("scheduler", str(tmp_path))
    supervisor = FakeSupervisor(running={"web-8002"})  # started by hand meanwhile: not an error
    clock = Clock()
    ready = set_start.start_when_ready(tmp_path, PROGRAMS, supervisor=supervisor, max_wait=30, clock=clock,
                                       sleep=clock.sleep, poll=0.5)
    assert ready is False
    assert supervisor.started == ["web-8001", "watchdog"]
    assert 30 <= clock.now <= 30.5


def test_another_fault_from_supervisord_is_not_swallowed(tmp_path):
    class Broken(FakeSupervisor):
        def startProcess(self, name, wait):  # noqa: N802
            raise xmlrpc.client.Fault(10, "BAD_NAME")

    clock = Clock()
    with pytest.raises(xmlrpc.client.Fault):
        set_start.start_when_ready(tmp_path, PROGRAMS, supervisor=Broken(), max_wait=0, clock=clock,
                                   sleep=clock.sleep)


def test_a_worker_outside_a_set_announces_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(set_start.RUN_DIR_ENV, raising=False)
    assert set_start.announce_worker_ready() is None
    monkeypatch.setenv(set_start.RUN_DIR_ENV, str(tmp_path))
    marker = set_start.announce_worker_ready(sender=object())
    assert marker is not None and marker.parent == tmp_path / set_start.READY_DIR and marker.exists()


def test_the_previous_set_is_stopped_once_the_step_path_is_up_and_before_the_web_programs_start(tmp_path):
    supervisor = FakeSupervisor()
    order = []
    set_start.announce_worker_ready(str(tmp_path))
    set_start.announce_ready("scheduler", str(tmp_path))
    clock = Clock()
    set_start.start_when_ready(tmp_path, PROGRAMS, supervisor=supervisor, clock=clock, sleep=clock.sleep,
                               before_start=lambda: order.append(list(supervisor.started)))
    assert order == [[]] and supervisor.started == PROGRAMS


def test_a_take_over_stops_the_previous_web_processes_before_the_web_programs_start_and_the_rest_after(tmp_path):
    supervisor = FakeSupervisor()
    set_start.announce_worker_ready(str(tmp_path))
    set_start.announce_ready("scheduler", str(tmp_path))
    order, said = [], []

    def stop(run_dir, *, wait, commands=None):
        order.append((commands, list(supervisor.started), wait))
        return [41] if commands else [42, 43]

    assert set_start.take_over(tmp_path, PROGRAMS, supervisor=supervisor, max_wait=5, stop_previous=True,
                               orphan_wait=10, stop=stop, say=said.append)
    # The ports first; the workers' warm shutdown no longer delays the web programs, and since nothing waits for
    # it, a running step gets the time a set gives its own workers to finish (a step KILLed mid-turn leaves its
    # session's lease to expire).
    assert order == [(set_start.WEB_COMMANDS, [], 10), (None, PROGRAMS, set_start.DEAD_WORKERS_WAIT_SECONDS)]
    assert set_start.DEAD_WORKERS_WAIT_SECONDS == 60
    assert [line.split(" (")[0] for line in said] == [
        "set start: stopped 1 web process(es) the previous set ran until now: [41]",
        f"set start: a worker and the scheduler are up; started {', '.join(PROGRAMS)}",
        "set start: stopped 2 other process(es) the previous set ran until now: [42, 43]"]
    order.clear()
    set_start.take_over(tmp_path, PROGRAMS, supervisor=FakeSupervisor(), max_wait=5, stop_previous=False,
                        orphan_wait=10, stop=stop, say=said.append)
    assert order == []  # a set started afresh stops nothing


def test_a_previous_sets_web_processes_are_told_from_its_other_processes(tmp_path):
    run_dir = str(tmp_path)
    this_set = spawn(run_dir, marked=False, name="supervisord")
    web, worker = spawn(run_dir, marked=True, name="daphne"), spawn(run_dir, marked=True, name="worker")
    try:
        found = wait_for_marked(run_dir, 8)  # each dead program: 3; this set: the program and its child
        ours = {pid for pid, parent in found.items() if parent == this_set.pid or found.get(parent) == this_set.pid}
        webs = set(orphans.marked_processes(run_dir, commands=set_start.WEB_COMMANDS))
        assert len(webs) == 3 and web.pid in webs and worker.pid not in webs

        stopped = set_start.stop_previous_set(tmp_path, wait=5, supervisord=this_set.pid,
                                              commands=set_start.WEB_COMMANDS)

        assert set(stopped) == webs and web.wait(timeout=10) == -15
        assert worker.poll() is None  # the dead set's other processes serve on until the second stop
        # (which also takes a web process's children, once their parent is gone: Daphne has none)
        set_start.stop_previous_set(tmp_path, wait=5, supervisord=this_set.pid)
        assert worker.wait(timeout=10) == -15 and set(orphans.marked_processes(run_dir)) == ours
    finally:
        for pid in orphans.marked_processes(run_dir):
            os.kill(pid, 9)
        for process in (this_set, web, worker):
            process.kill()
            process.wait()


TREE = ("import os, subprocess, sys, time\n"
        "env = {**os.environ, 'COMPACTWEB_SCALE_OUT_RUN_DIR': sys.argv[1]} if sys.argv[1] else dict(os.environ)\n"
        "code = 'import subprocess, sys, time; subprocess.Popen([sys.executable, \"-c\", \"import time; "
        "time.sleep(120)\"]); time.sleep(120)'\n"
        "subprocess.Popen([sys.executable, '-c', code], env=env)\n"
        "time.sleep(120)\n")


def spawn(run_dir: str, *, marked: bool, name: str) -> subprocess.Popen:
    """A process (named `name` on its command line) whose program and that program's child carry the set's
    marker; the process itself only when `marked` (a supervisord's own environment does not)."""
    env = {**os.environ, orphans.MARKER: run_dir} if marked else dict(os.environ)
    return subprocess.Popen([sys.executable, "-c", TREE, run_dir, name], env=env)


def wait_for_marked(run_dir: str, count: int) -> dict[int, int]:
    deadline = time.monotonic() + 60
    while len(found := orphans.marked_processes(run_dir)) < count:
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return found


def test_a_hand_over_stops_the_dead_sets_processes_and_none_of_this_sets(tmp_path):
    run_dir = str(tmp_path)
    this_set = spawn(run_dir, marked=False, name="supervisord")  # this set's supervisord and its program
    dead_set = spawn(run_dir, marked=True, name="worker")  # a dead set's program, its own children
    try:
        found = wait_for_marked(run_dir, 5)  # dead: 3; this set: the program and its child
        ours = {pid for pid, parent in found.items() if parent == this_set.pid or found.get(parent) == this_set.pid}
        assert len(ours) == 2

        assert set_start.previous_set_runs(tmp_path, supervisord=this_set.pid)  # the starter's longer bound

        stopped = set_start.stop_previous_set(tmp_path, wait=5, supervisord=this_set.pid)

        assert set(stopped) == set(found) - ours
        assert not set_start.previous_set_runs(tmp_path, supervisord=this_set.pid)
        assert dead_set.wait(timeout=10) == -15
        assert set(orphans.marked_processes(run_dir)) == ours
        # without a supervisord parent, a starter stops nothing
        assert set_start.stop_previous_set(tmp_path, wait=5, supervisord=os.getpid()) == []
        assert set(orphans.marked_processes(run_dir)) == ours
    finally:
        for pid in orphans.marked_processes(run_dir):
            os.kill(pid, 9)
        for process in (this_set, dead_set):
            process.kill()
            process.wait()


def test_the_launcher_kills_only_the_dead_sets_watchdog_at_once(tmp_path):
    run_dir = str(tmp_path)
    watchdog = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "manage.py", "watchdog"],
                                env={**os.environ, orphans.MARKER: run_dir})
    worker = spawn(run_dir, marked=True, name="worker")
    try:
        wait_for_marked(run_dir, 4)
        assert orphans.main(["--run-dir", run_dir, "--only", "watchdog", "--wait", "0"]) == 0
        assert watchdog.wait(timeout=10) == -9
        assert worker.poll() is None and len(orphans.marked_processes(run_dir)) == 3
    finally:
        for process in (watchdog, worker):
            process.kill()
            process.wait()
        for pid in orphans.marked_processes(run_dir):
            os.kill(pid, 9)
