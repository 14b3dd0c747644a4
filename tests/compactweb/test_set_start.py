"""compactweb.set_start (issue 42): a scale-out set's web processes and watchdog start once the step path is up (a
worker said it is ready and the scheduler beat), or after the bound anyway; a worker outside a set announces
nothing."""

from __future__ import annotations

import xmlrpc.client

import pytest

from compactweb import set_start

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
            (tmp_path / set_start.HEARTBEAT_FILE).touch()

    clock = Clock(world)
    ready = set_start.start_when_ready(tmp_path, PROGRAMS, supervisor=supervisor, clock=clock, sleep=clock.sleep,
                                       poll=0.5)
    assert ready is True
    assert supervisor.started == PROGRAMS
    assert clock.now == 5.0  # not before both were there
    assert all(started == [] for started in seen_before_start)


def test_a_worker_alone_or_a_scheduler_alone_is_not_the_step_path(tmp_path):
    set_start.announce_worker_ready(str(tmp_path))
    assert not set_start.step_path_ready(tmp_path)
    (tmp_path / set_start.HEARTBEAT_FILE).touch()
    assert set_start.step_path_ready(tmp_path)
    (tmp_path / set_start.READY_DIR / next(iter(p.name for p in (tmp_path / "ready").iterdir()))).unlink()
    assert not set_start.step_path_ready(tmp_path)


def test_the_web_programs_start_after_the_bound_when_no_worker_gets_ready(tmp_path):
    (tmp_path / set_start.HEARTBEAT_FILE).touch()
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
