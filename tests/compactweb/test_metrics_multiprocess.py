"""prometheus-client's multiprocess mode as compactweb uses it (docs/operations.md, "Metrics"): /metrics answers
what other processes counted into the shared directory; a process that died keeps its counts but its live gauges
(the recorder's queue) are dropped. Real processes, a real directory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from compactweb import metrics
from tests.metrics_reading import Scrape

ROOT = __file__.rsplit("/tests/", 1)[0]
CHILD = """
import sys
from compactweb import metrics
metrics.gateway_request(route="team", endpoint="responses", mode="upstream", status=200, first_byte=0.01,
                        total=0.02, hung_up=False)
metrics.recorder_wait.submitted()
metrics.recorder_wait.submitted()
print("counted", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def shared_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(metrics.MULTIPROC_ENV, str(tmp_path))
    return tmp_path


def child(directory) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True,
                               env={"PATH": "/usr/bin:/bin", metrics.MULTIPROC_ENV: str(directory),
                                    "PYTHONPATH": ROOT})
    assert process.stdout.readline().strip() == "counted"
    return process


def scrape() -> Scrape:
    body, _ = metrics.scrape()
    return Scrape(body.decode())


@pytest.mark.django_db
def test_metrics_add_up_what_every_process_counted_and_forget_the_queues_of_dead_ones(shared_dir):
    first, second = child(shared_dir), child(shared_dir)
    try:
        both = scrape()
        requests = {"route": "team", "endpoint": "responses", "mode": "upstream", "status": "200"}
        assert both.value("compactweb_gateway_requests_total", **requests) == 2
        assert both.value("compactweb_gateway_recorder_queue_depth") == 4

        first.communicate("\n", timeout=30)  # the first process ends
        after = scrape()
        assert after.value("compactweb_gateway_requests_total", **requests) == 2  # what it counted stays
        assert after.value("compactweb_gateway_recorder_queue_depth") == 2  # its queue does not
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.communicate("\n", timeout=30)
