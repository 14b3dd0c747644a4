"""`python -m compactweb.celery_worker`, the worker scripts/scale-out runs (issue 42): Celery's own worker command,
started without Celery's umbrella command line (which imports every other subcommand first, prompt_toolkit and
all). A real worker on a real Redis answers a ping under the node name its options gave it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.compactweb.test_package_imports import ROOT, run_python
from tests.scale_out.processes import forget_queue, stop

START_SECONDS = 120


def test_the_entry_runs_celerys_worker_command_without_the_umbrella_command_line():
    out = run_python("import sys\nfrom compactweb import celery_worker\ntry:\n    celery_worker.main(['--help'])\n"
                     "except SystemExit:\n    pass\n"
                     "print([m for m in ('celery.bin.celery', 'click_repl', 'prompt_toolkit') if m in sys.modules])",
                     DJANGO_SETTINGS_MODULE="compactweb.settings")
    assert "--without-mingle" in out  # Celery's worker command answered, with its options
    assert out.splitlines()[-1] == "[]"


@pytest.mark.services
def test_a_worker_started_by_the_entry_answers_under_the_node_name_its_options_gave(redis_url, tmp_path: Path):
    from celery import Celery
    from redis import Redis

    queue = f"compactweb-entry-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "CELERY_BROKER_URL": redis_url, "DJANGO_SETTINGS_MODULE": "compactweb.settings",
           "PYTHONPATH": str(ROOT), "CELERY_SKIP_CHECKS": "1"}
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "compactweb.celery_worker", "--pool", "solo", "-Q", queue, "-n", f"{queue}@%h",
             "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "info"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    client = Celery("compactweb-entry-test", broker=redis_url, set_as_current=False)
    node = f"{queue}@{socket.gethostname()}"
    try:
        deadline, replies = time.monotonic() + START_SECONDS, []
        while not replies and time.monotonic() < deadline:
            assert worker.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
            replies = client.control.ping(destination=[node], timeout=1.0)
        assert replies == [{node: {"ok": "pong"}}], log.read_text()[-3000:]
        queues = client.control.inspect(destination=[node], timeout=5.0).active_queues()
        # its -Q queue, and its own direct queue (the app's worker_direct: compactweb.worker_affinity)
        assert sorted(q["name"] for q in queues[node]) == sorted([queue, f"{node}.dq2"])
    finally:
        stop(worker)
        client.close()
        forget_queue(Redis.from_url(redis_url), queue)
