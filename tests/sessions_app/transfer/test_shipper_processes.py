"""The shipper and the server as separate processes, each killed (SIGKILL) while lines are in flight and
restarted: the server ends with every line of the file exactly once (issue 30)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compactweb.api_tokens import issue_token
from sessions_app.models import CodexSource, CodexSourceLine, Session
from sessions_app.transfer import exporter
from tests.scale_out.processes import database_env, start_daphne, stop, wait_for_log

ROOT = Path(__file__).resolve().parents[3]
ROLLOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"
LOCAL = (ROLLOUTS / "codex_0169_local_compaction.jsonl").read_bytes()
NAME = "rollout-2026-12-01T08-48-41-01a230ca-b869-7c02-b569-a052efd86504.jsonl"


def _port() -> int:
    """A free port: from COMPACTWEB_TEST_PORTS ("first-last") when a run is given a range, else any."""
    first, _, last = os.environ.get("COMPACTWEB_TEST_PORTS", "0-0").partition("-")
    for port in range(int(first), int(last) + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port")


def _server_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "COMPACTWEB_RUN_SIMULATOR",
                        "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(COMPACTWEB_VAR_DIR=str(tmp), DJANGO_SETTINGS_MODULE="compactweb.settings", PYTHONPATH=str(ROOT),
               DJANGO_DEBUG="0", PYTHONUNBUFFERED="1")
    env.update(database_env())
    return env


def _shipper(folder: Path, url: str, token: str, tmp: Path, log: Path) -> subprocess.Popen:
    # The shipper's machine has no compactweb database: a path of its own that it never opens.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(SQLITE_PATH=str(tmp / "shipper-unused.sqlite3"), COMPACTWEB_VAR_DIR=str(tmp),
               DJANGO_SETTINGS_MODULE="compactweb.settings", PYTHONUNBUFFERED="1", COMPACTWEB_SHIP_TOKEN=token)
    with open(log, "a") as out:
        return subprocess.Popen([sys.executable, "manage.py", "follow_rollouts", str(folder), "--to", url,
                                 "--name", "laptop", "--rescan", "0.3"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _lines_on_server() -> int:
    return CodexSource.objects.filter(path__startswith="shipped:").values_list("line_count", flat=True).first() or 0


def _wait(condition, what: str, limit: float = 90.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
def test_killing_the_shipper_and_the_server_loses_and_repeats_no_line(tmp_path, support_user, provider, policy):
    folder = tmp_path / "sessions"
    day = folder / "2026" / "12" / "01"
    day.mkdir(parents=True)
    path = day / NAME
    lines = LOCAL.splitlines(keepends=True)
    token = issue_token(user=support_user)  # Codex's rollouts hold its developer message: support's to ship
    port = _port()
    url = f"http://127.0.0.1:{port}"
    server_log, shipper_log = tmp_path / "server.log", tmp_path / "shipper.log"
    env = _server_env(tmp_path)

    def append(upto: int) -> None:
        have = path.read_bytes().count(b"\n") if path.exists() else 0
        with path.open("ab") as fh:
            fh.write(b"".join(lines[have:upto]))

    append(40)
    server = start_daphne(port=port, env=env, log=server_log)
    shipper = _shipper(folder, url, token, tmp_path, shipper_log)
    try:
        _wait(lambda: _lines_on_server() == 40, "the first 40 lines")
        # The shipper dies; lines written meanwhile are shipped by the next one, from the server's offset.
        shipper.send_signal(signal.SIGKILL)
        shipper.wait(timeout=10)
        append(80)
        shipper = _shipper(folder, url, token, tmp_path, shipper_log)
        _wait(lambda: _lines_on_server() == 80, "lines 41 to 80 after the shipper's restart")
        # The server dies; the shipper backs off and retries, then sends what was written meanwhile.
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        append(120)
        wait_for_log(shipper, shipper_log, "retrying in", timeout=60)
        server = start_daphne(port=port, env=env, log=server_log)
        _wait(lambda: _lines_on_server() == 120, "lines 81 to 120 after the server's restart")
        # Both die with lines in flight, and both start again.
        append(len(lines))
        time.sleep(0.2)
        shipper.send_signal(signal.SIGKILL)
        server.send_signal(signal.SIGKILL)
        shipper.wait(timeout=10)
        server.wait(timeout=10)
        server = start_daphne(port=port, env=env, log=server_log)
        shipper = _shipper(folder, url, token, tmp_path, shipper_log)
        _wait(lambda: _lines_on_server() == len(lines), "every line after both restarts")
    finally:
        stop(shipper)
        stop(server)
    source = CodexSource.objects.get(path__startswith="shipped:")
    numbers = list(CodexSourceLine.objects.filter(source=source).order_by("number").values_list("number", flat=True))
    assert numbers == list(range(1, len(lines) + 1))
    assert source.offset == len(LOCAL)
    session = Session.objects.get(pk=source.session_id)
    assert b"".join(x.encode() for x in exporter.export_rollout(session=session)) == LOCAL
