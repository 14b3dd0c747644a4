"""The real Codex CLI using compactweb's gateway as its model endpoint (issue 29), the upstream being the
dashboard's own simulated model at /sim (which writes down every request it receives).

`codex exec` (the pinned @openai/codex) runs turn after turn against `/gateway/v1` of a Daphne subprocess, as the
built-in openai provider (remote v2 compaction), with a small context window so it compacts at least twice, once
per route: `upstream` (the compaction request is forwarded) and `compactweb` (the route's masking policy compacts;
Codex gets a handle). Checked through the JSON API, as an operator would: the tools ran, the session's live history
after each recorded line equals the `input` the upstream received, request by request; the compactions carry
their real implementation; in compactweb mode Codex sends the handle back and the upstream receives the masked
history; and `codex exec resume` accepts the gateway session's export.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from compaction_app.providers.simulated.recording import read_requests
from tests.codex_cli.test_codex_exec_e2e import LIMIT, PROMPTS, WINDOW, CodexRun, _codex_or_skip
from tests.live_dashboard import ROOT
from tests.live_dashboard import free_port as _free_port

HERE = Path(__file__).resolve().parent
WIRE_ONLY = ("id", "status", "internal_chat_message_metadata_passthrough")
MASKED = "[output masked by compactweb"
# Codex compacts about every second or third turn with the small window (tests/codex_cli/test_codex_exec_e2e.py).
COMPACTIONS, MAX_TURNS = 5, 30


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """A live dashboard with gateway routes; yields (URL, seed, directory of the upstream's recorded requests)."""
    _codex_or_skip()
    work = tmp_path_factory.mktemp("gateway")
    sim_token = secrets.token_hex(16)
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(COMPACTWEB_VAR_DIR=str(work), SQLITE_PATH=str(work / "db.sqlite3"), COMPACTWEB_RUN_SIMULATOR="0",
               COMPACTWEB_SIM_TOKEN=sim_token, COMPACTWEB_KEY_SIM=sim_token,
               # the upstream is the dashboard's own /sim on loopback: listed and bound, as a deployment would
               # (docs/security.md, issue 27)
               COMPACTWEB_OUTBOUND_ALLOW=f"127.0.0.1:{port}",
               COMPACTWEB_PROVIDER_KEYS=f"COMPACTWEB_KEY_SIM=http://127.0.0.1:{port}/sim/v1",
               COMPACTWEB_SIM_RECORD_DIR=str(work / "requests"), COMPACTWEB_FOLLOW_ROLLOUTS_DIR="",
               PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="compactweb.settings")
    seeded = subprocess.run([sys.executable, str(HERE / "gateway_seed.py"), str(port)], env=env, cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert seeded.returncode == 0, seeded.stderr[-3000:]
    seed = json.loads(seeded.stdout.strip().splitlines()[-1])
    log = (work / "daphne.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             "compactweb.asgi:application"], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/gateway/v1/models", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((work / "daphne.log").read_text()[-2000:]) from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", seed, work / "requests"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _codex(tmp_path: Path, url: str, key: str, name: str, *, custom_provider: bool = False) -> CodexRun:
    """A Codex home configured as docs/gateway.md says: the built-in openai provider with the gateway as its base
    URL, or a custom provider named after the route (`upstream`) with the key in its env_key variable."""
    home, scratch = tmp_path / f"{name}-home", tmp_path / f"{name}-work"
    home.mkdir()
    scratch.mkdir()
    common = f'model = "compactweb-sim"\nmodel_context_window = {WINDOW}\nmodel_auto_compact_token_limit = {LIMIT}\n'
    if custom_provider:
        config = (common + 'model_provider = "upstream"\n[model_providers.upstream]\nname = "compactweb gateway"\n'
                  f'base_url = "{url}/gateway/v1"\nwire_api = "responses"\nenv_key = "COMPACTWEB_GATEWAY_KEY"\n')
    else:
        config = common + f'model_provider = "openai"\nopenai_base_url = "{url}/gateway/v1"\n'
    (home / "config.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update(CODEX_HOME=str(home), CODEX_API_KEY=key, OPENAI_API_KEY=key, COMPACTWEB_GATEWAY_KEY=key,
               NO_COLOR="1", RUST_LOG="error")
    return CodexRun(home, scratch, env)


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.headers = url, {"Authorization": f"Token {token}"}

    def get(self, path: str) -> httpx.Response:
        response = httpx.get(f"{self.url}/api/v1/{path}", headers=self.headers, timeout=60)
        assert response.status_code == 200, response.text
        return response

    def gateway_session(self, thread: str) -> dict:
        sessions = self.get("sessions").json()
        rows = sessions["results"] if isinstance(sessions, dict) else sessions
        (row,) = [s for s in rows if s.get("thread_id") == thread]
        return row

    def lines(self, session_id: int) -> list[dict]:
        return [json.loads(x) for x in self.get(f"sessions/{session_id}/rollout").text.splitlines() if x.strip()]


def _wire(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in WIRE_ONLY and v is not None}


def _histories(lines: list[dict]) -> list[list[dict]]:
    """The live history after every rollout line: response items append, a replacement history replaces."""
    history: list[dict] = []
    out = []
    for line in lines:
        payload = line["payload"]
        if line["type"] == "response_item":
            history = [*history, _wire(payload)]
        elif isinstance(payload, dict) and isinstance(payload.get("replacement_history"), list):
            history = [_wire(i) for i in payload["replacement_history"]]
        out.append(history)
    return out


def _thread(run: CodexRun) -> str:
    (path,) = run.rollout_files()
    return json.loads(path.read_text().splitlines()[0])["payload"]["id"]


def _drive(run: CodexRun, compactions: int, *, then: int = 0) -> None:
    """`codex exec` turn after turn (each must end with rc 0) until Codex has compacted `compactions` times, then
    `then` turns more: a session that lives on after its compactions."""
    for turn, prompt in enumerate(itertools.cycle(PROMPTS)):
        if run.compactions_in_file() >= compactions:
            break
        assert turn < MAX_TURNS, f"Codex compacted {run.compactions_in_file()} times in {MAX_TURNS} turns"
        run.exec(prompt)
    for prompt in PROMPTS[:then]:
        run.exec(prompt)


def _wait_recorded(api: Api, thread: str, received: int) -> dict:
    """The gateway records after each answer has streamed: wait until it has recorded every request."""
    deadline = time.monotonic() + 60
    while True:
        session = api.gateway_session(thread)
        lines = api.lines(session["id"])
        if sum(1 for x in lines if x["type"] == "event_msg" and x["payload"].get("type") == "token_count") >= received:
            return session
        assert time.monotonic() < deadline, "the gateway did not record every request"
        time.sleep(0.2)


def _check_history_is_what_the_upstream_received(lines: list[dict], bodies: list[dict]) -> None:
    histories = _histories(lines)
    at = 0
    for n, body in enumerate(bodies):
        items = body["input"]
        assert items[0]["role"] == "developer"  # Codex's base instructions: the session's, not its history
        expected = [_wire(i) for i in items[1:]]
        if expected and expected[-1].get("type") == "compaction_trigger":
            expected = expected[:-1]
        while at < len(histories) and histories[at] != expected:
            at += 1
        assert at < len(histories), f"request {n}: the upstream received a history the session never had"


def _check_tools_ran(run: CodexRun, lines: list[dict]) -> None:
    outputs = [x["payload"]["output"] for x in lines
               if x["type"] == "response_item" and x["payload"].get("type") == "function_call_output"]
    assert any("Process exited with code 0" in str(o) for o in outputs)
    assert (run.scratch / "notes.txt").exists()


def test_codex_through_the_gateway_in_upstream_mode_is_recorded_and_resumes_from_the_export(gateway, tmp_path):
    url, seed, recorded = gateway
    api = Api(url, seed["token"])
    run = _codex(tmp_path, url, seed["keys"]["upstream"], "upstream")
    _drive(run, COMPACTIONS, then=2)
    thread = _thread(run)
    mine = [r["body"] for r in read_requests(recorded) if r["headers"].get("thread-id") == thread]
    compaction_requests = [b for b in mine if b["input"][-1].get("type") == "compaction_trigger"]
    assert len(compaction_requests) >= COMPACTIONS
    session = _wait_recorded(api, thread, len(mine))
    assert session["source"] == "gateway" and session["title"].startswith("codex-upstream via upstream")
    lines = api.lines(session["id"])
    _check_tools_ran(run, lines)
    _check_history_is_what_the_upstream_received(lines, mine)
    attempts = api.get(f"sessions/{session['id']}/compactions").json()
    rows = attempts["results"] if isinstance(attempts, dict) else attempts
    assert len(rows) >= COMPACTIONS and {r["implementation"] for r in rows} == {"responses_compaction_v2"}

    # The export resumes in a fresh Codex home, against the gateway.
    first = _resume_from_the_export(api, run, session, tmp_path, url, seed["keys"]["upstream"], recorded)
    # Codex resumed the gateway session's history: its newest compaction item travels again.
    newest = _histories(lines)[-1]
    assert [i for i in newest if i.get("type") == "compaction"][-1] in first


def _resume_from_the_export(api: Api, run: CodexRun, session: dict, tmp_path: Path, url: str, key: str,
                            recorded: Path, *, custom_provider: bool = False) -> list[dict]:
    """`codex exec resume` of the gateway session's export in a fresh Codex home of the same config form; the
    export's session_meta names what Codex's own does (provider, folder, version, source). The input of the
    first request the resumed Codex sent."""
    exported = api.get(f"sessions/{session['id']}/export").text
    (path,) = run.rollout_files()
    own = json.loads(path.read_text().splitlines()[0])["payload"]
    meta = json.loads(exported.splitlines()[0])["payload"]
    fields = ("id", "model_provider", "cwd", "cli_version", "source")
    assert {k: meta.get(k) for k in fields} == {k: own[k] for k in fields}
    fresh = _codex(tmp_path, url, key, f"resumed-{run.home.name}", custom_provider=custom_provider)
    target = fresh.home / "sessions" / path.relative_to(run.home / "sessions")
    target.parent.mkdir(parents=True)
    target.write_text(exported)
    before = len(read_requests(recorded))
    fresh.exec("what did we do so far?", resume=own["id"])
    sent = read_requests(recorded)[before:]
    assert sent, "codex exec resume sent nothing"
    first = [_wire(i) for i in sent[0]["body"]["input"]]
    assert first[-1]["content"][0]["text"] == "what did we do so far?"
    return first


def test_codex_through_the_gateway_in_compactweb_mode_lives_on_through_the_routes_compactions(gateway, tmp_path):
    url, seed, recorded = gateway
    api = Api(url, seed["token"])
    run = _codex(tmp_path, url, seed["keys"]["compactweb"], "compactweb")
    # A workspace with many files, so that listing it (the simulated model's `ls -a`) is an output worth masking:
    # masking it leaves Codex room to work, masking the later small outputs does not (then summarisation runs).
    for n in range(150):
        (run.scratch / f"module_{n:03d}_with_a_long_descriptive_name.py").write_text("")
    _drive(run, COMPACTIONS, then=2)
    thread = _thread(run)
    mine = [r["body"] for r in read_requests(recorded) if r["headers"].get("thread-id") == thread]
    # compactweb answered every compaction: the upstream never saw a compaction request or a handle ...
    assert not any(b["input"][-1].get("type") == "compaction_trigger" for b in mine)
    assert not any(i.get("type") == "compaction" for b in mine for i in b["input"])
    # ... while Codex holds the handles and sends them back.
    (path,) = run.rollout_files()
    assert path.read_text().count("cwgh_") >= COMPACTIONS
    session = _wait_recorded(api, thread, len(mine))
    lines = api.lines(session["id"])
    _check_tools_ran(run, lines)
    _check_history_is_what_the_upstream_received(lines, mine)
    compactions = api.get(f"sessions/{session['id']}/compactions").json()
    rows = compactions["results"] if isinstance(compactions, dict) else compactions
    assert len(rows) >= COMPACTIONS
    # The route's masking where it leaves room to work, local summarisation (the route's fallback) where it
    # cannot; each summary follows a masking that was refused before it was installed, which says why.
    kinds = [r["implementation"] for r in rows]
    assert "observation_masking" in kinds and set(kinds) <= {"observation_masking", "responses"}
    attempts = api.get(f"sessions/{session['id']}/attempts").json()
    attempts = attempts["results"] if isinstance(attempts, dict) else attempts
    refused = [a for a in attempts if a["status"] == "failed" and a["method"] == "masking"
               and (a["error"] or {}).get("kind") in ("short_of_target", "nothing_to_mask")]
    assert len(refused) == kinds.count("responses")
    # The upstream received the masked history.
    assert any(str(i.get("output", "")).startswith(MASKED) for b in mine for i in b["input"])


def test_codex_as_a_custom_provider_compacts_locally_through_the_gateway_and_it_is_recorded_as_local(gateway,
                                                                                                   tmp_path):
    url, seed, recorded = gateway
    api = Api(url, seed["token"])
    run = _codex(tmp_path, url, seed["keys"]["upstream"], "custom", custom_provider=True)
    _drive(run, 2)
    thread = _thread(run)
    mine = [r["body"] for r in read_requests(recorded) if r["headers"].get("thread-id") == thread]
    session = _wait_recorded(api, thread, len(mine))
    lines = api.lines(session["id"])
    _check_tools_ran(run, lines)
    # Codex's local summarization request ends in its summarization prompt, which is no part of the history.
    turns = [b for b in mine if b.get("tools")]
    _check_history_is_what_the_upstream_received(lines, turns)
    compactions = api.get(f"sessions/{session['id']}/compactions").json()
    rows = compactions["results"] if isinstance(compactions, dict) else compactions
    assert len(rows) >= 2 and {r["implementation"] for r in rows} == {"responses"}
    # The export resumes under the custom provider (named after the route, as docs/gateway.md says).
    first = _resume_from_the_export(api, run, session, tmp_path, url, seed["keys"]["upstream"], recorded,
                                    custom_provider=True)
    newest = _histories(lines)[-1]
    assert [_wire(i) for i in newest if i.get("role") == "user"][-1] in first  # the recorded history came back
