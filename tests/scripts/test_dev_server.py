"""The first start: Ctrl-C stops the dashboard (with the in-process simulator driving a fleet) without a traceback,
and a test run never writes into tracked files (screenshots go to an untracked folder unless asked).

The Ctrl-C test starts a real Daphne in a subprocess with a migrated SQLite file and a running fleet; it costs
about 10-15 s, the only way to see what the process prints when interrupted."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = """
import django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from compaction_app.models import CompactionPolicy, Provider
from sessions_app.fleet.runtime import do_start_fleet
provider = Provider.objects.create(name="embedded", base_url=Provider.EMBEDDED, model="sim-1", context_window=32000)
policy = CompactionPolicy.objects.create(name="default")
do_start_fleet(scenario="many-short-turns", count=3, provider=provider, policy=policy, loop=True,
               context_window=6000)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rollout_lines(database: Path) -> int:
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as db:
        return db.execute("SELECT count(*) FROM sessions_app_rolloutline").fetchone()[0]


def test_ctrl_c_stops_the_dashboard_and_its_simulator_without_a_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(COMPACTWEB_VAR_DIR=str(tmp_path), SQLITE_PATH=str(tmp_path / "dev.sqlite3"),
               DJANGO_SETTINGS_MODULE="compactweb.settings", COMPACTWEB_RUN_SIMULATOR="1", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", SEED], env=env, cwd=ROOT, check=True, timeout=120)
    port = _free_port()
    daphne = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "compactweb.asgi:application"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's Ctrl-C would reach it
    )
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        # Interrupt once the simulator is stepping (new rollout lines appear), so a step is likely in flight.
        seeded = _rollout_lines(tmp_path / "dev.sqlite3")
        while _rollout_lines(tmp_path / "dev.sqlite3") < seeded + 2:
            assert daphne.poll() is None, daphne.communicate()[0][-3000:]
            time.sleep(0.1)
        daphne.send_signal(signal.SIGINT)
        output, _ = daphne.communicate(timeout=60)
    finally:
        if daphne.poll() is None:
            daphne.kill()
    assert daphne.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "Exception in thread" not in output, output[-3000:]


def test_screenshots_of_a_test_run_go_to_an_untracked_folder():
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("not a git checkout")
    import importlib.util

    spec = importlib.util.spec_from_file_location("browser_conftest", ROOT / "tests" / "browser" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    env = os.environ.pop("COMPACTWEB_SCREENSHOTS", None)
    try:
        spec.loader.exec_module(module)
    finally:
        if env is not None:
            os.environ["COMPACTWEB_SCREENSHOTS"] = env
    target = module.SCREENSHOTS / "fleet.png"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(target.relative_to(ROOT))], cwd=ROOT)
    assert ignored.returncode == 0, f"{target} would be a tracked file"


def test_a_busy_port_is_refused_before_any_setup_with_how_to_choose_another():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(["bash", str(ROOT / "scripts" / "dev")], cwd=ROOT, capture_output=True, text=True,
                                env={**os.environ, "HOST": "127.0.0.1", "PORT": str(port)}, timeout=60)
    assert result.returncode == 1
    assert f"127.0.0.1:{port} is already in use" in result.stderr
    assert "PORT=8001 scripts/dev" in result.stderr
    # Refused before the venv step: nothing of the setup was printed.
    assert "setting up .venv" not in result.stdout and "migrating" not in result.stdout
