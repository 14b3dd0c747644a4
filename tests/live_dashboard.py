"""A live dashboard (Daphne in a subprocess) for the tests that drive a real agent CLI against its simulated model
(tests/codex_cli, tests/claude_code), and the check that the pinned CLI is installed."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli_folder(here: Path, variable: str) -> Path:
    """The npm folder a CLI end-to-end test runs from: its own (the pinned release, `npm ci`), or the folder the
    environment variable names (scripts/test-newest-clis installs the newest release there)."""
    named = os.environ.get(variable)
    return Path(named).resolve() if named else here


def installed_cli_or_skip(cli: Path, pinned: str, *, name: str, folder: str) -> Path:
    """The pinned CLI, or a skip with the reason; under CI a missing CLI fails the test instead."""
    problem = None
    if shutil.which("node") is None:
        problem = "node is not installed"
    elif not cli.exists():
        problem = f"the {name} is not installed: run `npm ci --prefix {folder}` (scripts/test does)"
    else:
        version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60).stdout
        if pinned not in version:
            problem = f"{folder} has {version.strip()!r}, not the pinned {pinned}: run `npm ci --prefix {folder}`"
    if problem is None:
        return cli
    if os.environ.get("CI"):
        pytest.fail(f"{problem}; CI must run the {name} end-to-end test")
    pytest.skip(problem)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live_dashboard(work: Path) -> Iterator[tuple[str, str, Path]]:
    """Daphne serving the dashboard whose simulated model records every request; yields (its base URL, the sim
    token, the folder of the request log)."""
    token = secrets.token_hex(16)
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(COMPACTWEB_VAR_DIR=str(work), SQLITE_PATH=str(work / "db.sqlite3"), COMPACTWEB_RUN_SIMULATOR="0",
               COMPACTWEB_SIM_TOKEN=token, COMPACTWEB_SIM_RECORD_DIR=str(work / "requests"),
               COMPACTWEB_FOLLOW_ROLLOUTS_DIR="", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             "compactweb.asgi:application"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=(work / "daphne.log").open("wb"))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((work / "daphne.log").read_text()[-2000:]) from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", token, work / "requests"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def wait_for(condition, *, what: str, limit: float = 30.0) -> None:
    """Wait until `condition()` holds (the follower catching up with a CLI's file)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting: {what}")
        time.sleep(0.05)


def histories_after(session, view=list) -> list[tuple[int, list[dict]]]:
    """(seq, `view` of the live history after that line) for every rollout line: compactweb's view as it
    followed."""
    from sessions_app.models import RolloutLine
    from sessions_app.rollout import projection as p

    projection = p.Projection()
    out = []
    rows = RolloutLine.objects.filter(session=session).order_by("seq").values_list(
        "seq", "kind", "payload", "tokens", "item_tokens")
    for seq, kind, payload, tokens, item_tokens in rows:
        projection.apply(p.Line(seq=seq, kind=kind, payload=payload, tokens=tokens, item_tokens=item_tokens))
        out.append((seq, view([dict(i) for i in projection.items])))
    return out
