"""The official openai SDK, pointed at /sim/v1/ of a running dashboard (Daphne serving compactweb.asgi), can stream
a response and compact a conversation, and parses both."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

REPO = Path(__file__).resolve().parents[3]
SIM_TOKEN = "sim-token-for-the-sdk-test"  # outside clients authenticate to /sim with COMPACTWEB_SIM_TOKEN


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> Iterator[str]:
    var_dir = tmp_path_factory.mktemp("var")
    port = _free_port()
    # Its own SQLite file whatever the pass: without DATABASE_URL and the service URLs, which would point the
    # dashboard at a database outside the test's.
    outside = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"}
    env = {
        **{name: value for name, value in os.environ.items() if name not in outside},
        "DJANGO_SETTINGS_MODULE": "compactweb.settings",
        "COMPACTWEB_VAR_DIR": str(var_dir),
        "SQLITE_PATH": str(var_dir / "db.sqlite3"),
        "PYTHONPATH": str(REPO),
        "COMPACTWEB_SIM_TOKEN": SIM_TOKEN,
    }
    # A real dashboard has a migrated database: the /sim guard looks API tokens and logins up in it.
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "compactweb.asgi:application"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                ready = urllib.request.Request(f"{base}/sim/v1/models", headers={"Authorization": f"Bearer {SIM_TOKEN}"})
                with urllib.request.urlopen(ready, timeout=1) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                output = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
                pytest.fail(f"dashboard did not start on {base}: {output[-2000:]}")
            time.sleep(0.1)
        yield f"{base}/sim/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_openai_sdk_streams_a_response_from_the_dashboard_simulator(dashboard):
    client = openai.OpenAI(base_url=dashboard, api_key=SIM_TOKEN, max_retries=0)
    stream = client.responses.create(
        model="compactweb-sim",
        input=[{"role": "user", "content": "Explain what src/app.py does"}],
        stream=True,
    )
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    final = events[-1].response
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert final.output[0].type == "message" and final.output[0].content[0].text == text
    assert "src/app.py" in text


def test_openai_sdk_compacts_through_the_dashboard_simulator(dashboard):
    client = openai.OpenAI(base_url=dashboard, api_key=SIM_TOKEN, max_retries=0)
    compacted = client.responses.compact(
        model="compactweb-sim",
        input=[
            {"role": "user", "content": "Run the tests in tests/test_api.py"},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command": "pytest -q"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "FAILED tests/test_api.py::test_list"},
        ],
    )
    assert compacted.object == "response.compaction"
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    assert compacted.output[-1].encrypted_content
    assert compacted.usage.input_tokens > 0


def test_an_sdk_client_without_the_sim_token_is_refused(dashboard):
    client = openai.OpenAI(base_url=dashboard, api_key="sk-guessed", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        client.models.list()
    assert refused.value.status_code == 401
