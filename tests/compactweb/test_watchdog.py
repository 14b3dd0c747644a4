"""The watchdog (compactweb.watchdog): restarts a supervised program whose liveness probe fails three rounds in a
row, never one that is starting, stopped, or that cannot be judged (the broker is down); a web process answering
503 is alive."""

from __future__ import annotations

import http.server
import threading

import pytest

from compactweb import watchdog


class FakeSupervisor:
    def __init__(self, **programs):
        self.info = {name: {"statename": "RUNNING", "start": 0.0, "pid": 100 + i}
                     for i, name in enumerate(programs)}
        self.calls: list[tuple[str, str]] = []

    def getProcessInfo(self, name):  # noqa: N802 - supervisord's XML-RPC names
        return self.info[name]

    def stopProcess(self, name, wait):  # noqa: N802
        self.calls.append(("stop", name))

    def startProcess(self, name, wait):  # noqa: N802
        self.calls.append(("start", name))


def dog(supervisor, probes, now=1000.0):
    return watchdog.Watchdog(supervisor=supervisor, probes=probes, clock=lambda: now)


def test_a_program_failing_three_rounds_in_a_row_is_restarted_once():
    supervisor = FakeSupervisor(**{"web-8001": None, "web-8002": None})
    w = dog(supervisor, {"web-8001": lambda: False, "web-8002": lambda: True})

    assert [w.check_once() for _ in range(3)] == [[], [], ["web-8001"]]
    assert supervisor.calls == [("stop", "web-8001"), ("start", "web-8001")]
    assert w.check_once() == []  # the count starts again after a restart


def test_a_passing_round_resets_the_count():
    answers = iter([False, False, True, False, False])
    supervisor = FakeSupervisor(**{"worker-1": None})
    w = dog(supervisor, {"worker-1": lambda: next(answers)})

    for _ in range(5):
        w.check_once()

    assert supervisor.calls == []


@pytest.mark.parametrize("state, start", [("STARTING", 0.0), ("STOPPED", 0.0), ("RUNNING", 995.0)])
def test_a_program_starting_stopped_or_in_its_grace_period_is_not_judged(state, start):
    supervisor = FakeSupervisor(**{"web-8001": None})
    supervisor.info["web-8001"].update(statename=state, start=start)
    w = dog(supervisor, {"web-8001": lambda: False})

    for _ in range(5):
        w.check_once()

    assert supervisor.calls == []


def test_workers_are_not_judged_while_the_broker_is_down():
    supervisor = FakeSupervisor(**{"worker-1": None})
    w = dog(supervisor, {"worker-1": lambda: watchdog.UNKNOWN})

    for _ in range(5):
        w.check_once()

    assert supervisor.calls == []


@pytest.fixture
def http_server():
    class Answer503(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer503)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_web_process_answering_503_is_alive_and_one_not_listening_is_not(http_server):
    port = http_server.server_address[1]
    assert watchdog.web_alive("127.0.0.1", port, timeout=5)
    http_server.shutdown()
    http_server.server_close()
    assert not watchdog.web_alive("127.0.0.1", port, timeout=1)


def test_a_scheduler_is_alive_while_its_heartbeat_file_is_fresh(tmp_path):
    beat = tmp_path / "scheduler.heartbeat"
    assert not watchdog.scheduler_alive(str(beat))  # never beat

    beat.touch()
    mtime = beat.stat().st_mtime
    assert watchdog.scheduler_alive(str(beat), max_age=30, clock=lambda: mtime + 30)
    assert not watchdog.scheduler_alive(str(beat), max_age=30, clock=lambda: mtime + 31)


def test_a_scheduler_whose_heartbeat_went_stale_is_restarted(tmp_path):
    beat = tmp_path / "scheduler.heartbeat"
    beat.touch()
    stale_at = beat.stat().st_mtime + 60
    supervisor = FakeSupervisor(scheduler=None)
    w = watchdog.Watchdog(supervisor=supervisor, clock=lambda: stale_at, probes={
        "scheduler": lambda: watchdog.scheduler_alive(str(beat), max_age=30, clock=lambda: stale_at)})

    assert [w.check_once() for _ in range(3)] == [[], [], ["scheduler"]]
    assert supervisor.calls == [("stop", "scheduler"), ("start", "scheduler")]


def test_the_watchdog_command_watches_the_scheduler_when_given_its_heartbeat(tmp_path, monkeypatch):
    from django.core.management import call_command

    built = {}

    class Stop(Exception):
        pass

    def fake_dog(**kwargs):
        built.update(kwargs)
        raise Stop

    monkeypatch.setattr(watchdog, "supervisor_proxy", lambda path: object())
    monkeypatch.setattr(watchdog, "Watchdog", fake_dog)
    with pytest.raises(Stop):
        call_command("watchdog", "--supervisor-socket", str(tmp_path / "s.sock"), "--scheduler-heartbeat",
                     str(tmp_path / "beat"), "--heartbeat-max-age", "3", "--grace", "5")

    assert set(built["probes"]) == {"scheduler"} and built["grace_seconds"] == 5
    assert built["probes"]["scheduler"]() is False  # no heartbeat file yet


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class RestartingSupervisor(FakeSupervisor):
    """A restart gives the program a new process started at the clock's time (as supervisord does)."""

    def __init__(self, clock, **programs):
        super().__init__(**programs)
        self.clock = clock

    def startProcess(self, name, wait):  # noqa: N802
        super().startProcess(name, wait)
        self.info[name].update(start=self.clock(), pid=self.info[name]["pid"] + 1)


def run_for(w: watchdog.Watchdog, clock: Clock, seconds: float, interval: float = 5.0) -> None:
    end = clock.now + seconds
    while clock.now < end:
        w.check_once()
        clock.now += interval


def test_a_worker_that_starts_slowly_on_a_saturated_host_is_restarted_with_back_off_not_every_round():
    """The reported case: for six minutes no worker answered a ping in time; restarts were 12 in 6 minutes."""
    clock = Clock()
    supervisor = RestartingSupervisor(clock, **{"worker-1": None})
    w = watchdog.Watchdog(supervisor=supervisor, probes={"worker-1": lambda: False}, clock=clock)

    run_for(w, clock, 360)

    # after each restart it gets 30, 60, 120 s to become ready: restarts at 1000, ~1035, ~1100, ~1225 at most
    assert 1 <= w.restarts.count("worker-1") <= 4
    restart_times = []
    clock2 = Clock()
    supervisor2 = RestartingSupervisor(clock2, **{"worker-1": None})
    w2 = watchdog.Watchdog(supervisor=supervisor2, probes={"worker-1": lambda: False}, clock=clock2)
    while clock2.now < 1000 + 360:
        if w2.check_once():
            restart_times.append(clock2.now)
        clock2.now += 5
    gaps = [b - a for a, b in zip(restart_times, restart_times[1:], strict=False)]
    assert gaps == sorted(gaps) and all(g >= 30 for g in gaps)  # each wait at least as long as the one before


def test_a_restarted_program_that_becomes_ready_late_is_not_judged_before_it_answers():
    clock = Clock()
    answers = {"ready_at": 1000.0 + 50}
    supervisor = RestartingSupervisor(clock, **{"worker-1": None})
    supervisor.info["worker-1"]["start"] = 900.0
    hung = {"yes": True}

    def probe():
        if hung["yes"]:
            return False
        return clock.now >= answers["ready_at"]

    w = watchdog.Watchdog(supervisor=supervisor, probes={"worker-1": probe}, clock=clock)
    run_for(w, clock, 15)  # three failures: restarted once
    assert w.restarts == ["worker-1"]
    hung["yes"] = False
    answers["ready_at"] = clock.now + 25  # it answers 25 s after its start: inside its 30 s readiness window
    run_for(w, clock, 120)
    assert w.restarts == ["worker-1"] and w.states["worker-1"].ready


def test_answering_for_a_while_forgets_the_restarts_in_a_row():
    clock = Clock()
    alive = {"now": False}
    supervisor = RestartingSupervisor(clock, **{"web-8001": None})
    w = watchdog.Watchdog(supervisor=supervisor, probes={"web-8001": lambda: alive["now"]}, clock=clock)
    run_for(w, clock, 15)
    assert w.states["web-8001"].restarts_in_a_row == 1
    alive["now"] = True
    run_for(w, clock, watchdog.HEALTHY_RESET_SECONDS + 60)
    assert w.states["web-8001"].restarts_in_a_row == 0
    alive["now"] = False
    run_for(w, clock, 15)  # hung again: restarted at once, no back-off left over
    assert w.restarts == ["web-8001", "web-8001"]


def test_a_second_restart_in_a_row_waits_out_its_back_off():
    clock = Clock()
    alive = {"now": False}
    supervisor = RestartingSupervisor(clock, **{"web-8001": None})
    w = watchdog.Watchdog(supervisor=supervisor, probes={"web-8001": lambda: alive["now"]}, clock=clock,
                          grace_seconds=0)
    run_for(w, clock, 15)
    assert w.restarts == ["web-8001"]
    first = w.states["web-8001"].last_restart
    alive["now"] = True
    run_for(w, clock, 5)  # ready again, but not for long
    alive["now"] = False
    run_for(w, clock, 15)  # three failures, 20 s after the restart: the back-off (30 s) has not passed
    assert w.restarts == ["web-8001"]
    run_for(w, clock, 15)
    assert w.restarts == ["web-8001", "web-8001"]
    assert w.states["web-8001"].last_restart - first >= watchdog.backoff_seconds(0)


def test_back_off_doubles_up_to_its_cap():
    assert [watchdog.backoff_seconds(n, base=30, cap=600) for n in range(7)] == [30, 60, 120, 240, 480, 600, 600]


def test_probe_timeouts_stretch_with_the_hosts_load_within_a_bound():
    assert watchdog.probe_timeout(3.0, load=0.2) == 3.0
    assert watchdog.probe_timeout(3.0, load=2.5) == 7.5
    assert watchdog.probe_timeout(3.0, load=50) == 3.0 * watchdog.MAX_LOAD_STRETCH
