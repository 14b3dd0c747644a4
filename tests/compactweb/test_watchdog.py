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
