"""Browser tests: Playwright's sync API driving Debian's chromium against the real ASGI app served by Daphne in a
subprocess (a file SQLite database seeded by seed_server.py; the Redis channel layer when REDIS_URL is set).

Without /usr/bin/chromium the tests are skipped with the reason, except under CI, where they fail: install it with
`apt-get install chromium` (.ci/run does). Never `playwright install`: it downloads a browser.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
# Screenshots go to an untracked folder, so a test run never modifies tracked files. To refresh the README's
# pictures, ask for it: COMPACTWEB_SCREENSHOTS=docs/screenshots .venv/bin/pytest -m browser tests/browser
SCREENSHOTS = ROOT / os.environ.get("COMPACTWEB_SCREENSHOTS", "artifacts/screenshots")


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session", autouse=True)
def _chromium_available() -> None:
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing and CI is set: browser tests must run in CI (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) to run browser tests")


@pytest.fixture(autouse=True)
def _allow_sync_orm_beside_playwright(monkeypatch):
    # Playwright's sync API keeps an event loop in this thread; Django would refuse any ORM call made here.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="module")
def browser():
    """Playwright's sync API with the system chromium, started and stopped per module.

    Not pytest-playwright's session-scoped fixtures: while sync Playwright runs, this thread has a running event
    loop, and every later test calling asyncio.run() (the async tests of the rest of the suite) would fail.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A fresh page; the test fails if the dashboard's own pages break their Content-Security-Policy."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    yield page
    context.close()
    assert not violations, f"CSP violations: {violations}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"daphne did not listen on {port} within {timeout}s")


class LiveServer:
    def __init__(self, url: str, seed: dict, log: Path) -> None:
        self.url = url
        self.seed = seed
        self.log = log

    def user(self, role: str) -> dict:
        return self.seed["users"][role]

    def api(self, method: str, path: str, role: str = "operator", body: dict | None = None) -> dict:
        import httpx

        response = httpx.request(
            method, f"{self.url}/api/v1/{path}", json=body, timeout=30,
            headers={"Authorization": f"Token {self.user(role)['token']}"},
        )
        response.raise_for_status()
        return response.json() if response.content else {}


@contextmanager
def serving(var: Path, **seed_env: str) -> Iterator[LiveServer]:
    """Daphne serving compactweb (with the in-process simulator scheduler) on a free 127.0.0.1 port, its database
    seeded by seed_server.py (`seed_env`: extra environment for the seed, e.g. COMPACTWEB_SEED_FLEET)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        COMPACTWEB_VAR_DIR=str(var), SQLITE_PATH=str(var / "browser.sqlite3"), COMPACTWEB_RUN_SIMULATOR="1",
        DJANGO_SETTINGS_MODULE="compactweb.settings", PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]),
        DJANGO_DEBUG="0",
    )
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    seeded = subprocess.run(
        [sys.executable, str(HERE / "seed_server.py")], env={**env, **seed_env}, cwd=ROOT, capture_output=True,
        text=True, check=False,
    )
    if seeded.returncode:
        raise RuntimeError(f"seeding the browser test server failed:\n{seeded.stderr[-3000:]}")
    seed = json.loads(seeded.stdout.strip().splitlines()[-1])
    port = _free_port()
    log = var / "daphne.log"
    with open(log, "w") as out:
        daphne = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "live_asgi:application"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_port(port, daphne)
        yield LiveServer(f"http://127.0.0.1:{port}", seed, log)
    finally:
        daphne.terminate()
        try:
            daphne.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daphne.kill()


@pytest.fixture(scope="session")
def web(tmp_path_factory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory.mktemp("browser-var")) as server:
        yield server


@pytest.fixture
def login(page, browser, web):
    """login(role) → the test's page, logged in through the login form; login(role, fresh=True) → a page of a new
    browser context (another user beside the first)."""

    def do(role: str, fresh: bool = False):
        target = browser.new_context(viewport={"width": 1440, "height": 900}).new_page() if fresh else page
        user = web.user(role)
        target.goto(f"{web.url}/login/")
        target.fill("#id_username", user["username"])
        target.fill("#id_password", user["password"])
        target.click("button[type=submit]")
        target.wait_for_load_state()
        return target

    return do


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
