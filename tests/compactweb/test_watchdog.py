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
