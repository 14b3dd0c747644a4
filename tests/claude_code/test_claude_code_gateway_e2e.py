"""The real Claude Code CLI using compactweb's Anthropic gateway as its model endpoint (issue 44), the upstream
being the dashboard's own simulated model at /sim/anthropic (which writes down every request it receives).

`claude -p` (the pinned @anthropic-ai/claude-code) runs prompt after prompt (`--continue`, one session) in a
scratch folder with nothing but `ANTHROPIC_BASE_URL=<dashboard>/gateway/r/<route>/anthropic` and the gateway key
as `ANTHROPIC_API_KEY`, its auto-compaction window set small (as tests/claude_code/test_claude_code_e2e.py does) so
it compacts every few prompts, and one `/compact`; once per route:

- `upstream`: Claude Code's summary requests are forwarded; each compaction is recorded with its summary
  requests' usage as its call tokens;
- `compactweb`: the route's local-summarisation policy (the admin's prompt) answers every summary request; the
  upstream never receives one, and Claude Code continues from the policy's summary.

Checked through the JSON API, as an operator would: the Bash tool ran, at least three compactions, and the
session's live history after some recorded line equals the conversation the upstream received, request by
request. Cost: about 20-40 s of wall time per route.
"""

from __future__ import annotations

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
from gateway_app import anthropic_wire
from tests.claude_code.test_claude_code_e2e import (
    AUTO_COMPACT_WINDOW,
    CLAUDE,
    CLI_FOLDER,
    FILLER,
    PCT,
    PINNED,
)
from tests.codex_cli.test_codex_gateway_e2e import Api, _histories, _wire
from tests.live_dashboard import ROOT, installed_cli_or_skip
from tests.live_dashboard import free_port as _free_port

HERE = Path(__file__).resolve().parent
ADMIN_PROMPT = "Summarise this Claude Code session for the team"  # the start of gateway_seed.py's
PROMPTS = [
    "please fix parser bug number 3 in the notes",
    "now write the docs for the loader module",
    "check the tests for the parser and report",
    "/compact",
    "add a changelog entry for the parser fix",
    "review the loader docs again",
    "fix the parser notes once more",
    "summarise the parser work for the changelog",
]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """A live dashboard with two Claude gateway routes; yields (URL, seed, directory of the upstream's requests)."""
    installed_cli_or_skip(CLAUDE, PINNED, name="Claude Code CLI",
                          folder="tests/claude_code" if CLI_FOLDER == HERE else str(CLI_FOLDER))
    work = tmp_path_factory.mktemp("claude-gateway")
    sim_token = secrets.token_hex(16)
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(COMPACTWEB_VAR_DIR=str(work), SQLITE_PATH=str(work / "db.sqlite3"), COMPACTWEB_RUN_SIMULATOR="0",
               COMPACTWEB_SIM_TOKEN=sim_token, COMPACTWEB_KEY_SIM=sim_token,
               COMPACTWEB_OUTBOUND_ALLOW=f"127.0.0.1:{port}",
               COMPACTWEB_PROVIDER_KEYS=f"COMPACTWEB_KEY_SIM=http://127.0.0.1:{port}/sim/anthropic",
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


class ClaudeRun:
    """A Claude Code home set up as docs/claude-code.md says for the gateway: the base URL and the key, nothing
    else (plus what keeps it offline and compacting early)."""

    def __init__(self, tmp_path: Path, name: str, base_url: str, key: str) -> None:
        self.home, self.scratch = tmp_path / f"{name}-home", tmp_path / f"{name}-work"
        self.home.mkdir()
        self.scratch.mkdir()
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_"))}
        self.env.update(HOME=str(self.home), CLAUDE_CONFIG_DIR=str(self.home / ".claude"),
                        ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY=key, DISABLE_TELEMETRY="1",
                        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                        DISABLE_ERROR_REPORTING="1", NO_COLOR="1",
                        CLAUDE_CODE_AUTO_COMPACT_WINDOW=AUTO_COMPACT_WINDOW, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=PCT)
        self.session_id = ""

    def run(self, prompt: str) -> None:
        text = prompt if prompt.startswith("/") else f"{prompt}. {FILLER}"
        args = [str(CLAUDE), "-p", text, "--model", "claude-sonnet-4-5", "--tools", "Bash", "--allowedTools", "Bash",
                "--output-format", "json", *(["--continue"] if self.session_id else [])]
        result = subprocess.run(args, cwd=self.scratch, env=self.env, capture_output=True, text=True, timeout=180,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
        self.session_id = self.session_id or json.loads(result.stdout)["session_id"]

    def transcript(self) -> list[dict]:
        (path,) = [f for f in (self.home / ".claude" / "projects").rglob(f"{self.session_id}.jsonl")]
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def compact_boundaries(self) -> int:
        return sum(1 for e in self.transcript() if e.get("type") == "system" and e.get("subtype") == "compact_boundary")


def _drive(run: ClaudeRun) -> None:
    for prompt in PROMPTS:
        run.run(prompt)
        if run.compact_boundaries() >= 3 and prompt != "/compact" and PROMPTS.index(prompt) > 3:
            return
    assert run.compact_boundaries() >= 3, "Claude Code did not compact three times within the prompts"


def _received(recorded: Path, session_id: str) -> list[dict]:
    """The Messages requests of this Claude Code session the upstream received, in order."""
    out = []
    for request in read_requests(recorded):
        body = request["body"]
        if request["endpoint"] == "/anthropic/v1/messages" and \
                anthropic_wire.claude_session(body, request.get("headers") or {}) == session_id:
            out.append(body)
    return out


def _conversation(body: dict) -> list[dict]:
    items = anthropic_wire.items_of(body)
    return [_wire(i) for i in anthropic_wire.history_of(items, anthropic_wire.request_kind(items))]


def _wait_recorded(api: Api, thread: str, bodies: list[dict], compactions: int) -> tuple[dict, list[dict]]:
    """The gateway records after each answer has streamed: wait until it recorded every turn's usage and every
    compaction (a summary request's history and usage are written with its compaction, which may land after the
    next turn's usage line)."""
    turns = sum(1 for b in bodies if anthropic_wire.request_kind(anthropic_wire.items_of(b)) == "turn")
    deadline = time.monotonic() + 60
    while True:
        session = api.gateway_session(thread)
        lines = api.lines(session["id"])
        usage = sum(1 for x in lines if x["type"] == "event_msg" and x["payload"].get("type") == "token_count")
        compacted = sum(1 for x in lines if x["type"] == "compacted")
        if usage >= turns and compacted >= compactions:
            return session, lines
        assert time.monotonic() < deadline, \
            f"the gateway recorded {usage} of {turns} turns and {compacted} of {compactions} compactions"
        time.sleep(0.2)


def _check_history_is_what_the_upstream_received(lines: list[dict], bodies: list[dict]) -> None:
    """Each request's conversation, in order, is the session's history after some recorded line; a summary
    request's is the start of one (Claude Code summarises up to some point and keeps its newest messages verbatim
    after the summary, so it does not send them)."""
    histories = _histories(lines)
    at = 0
    for n, body in enumerate(bodies):
        expected = _conversation(body)
        summary = anthropic_wire.request_kind(anthropic_wire.items_of(body)) != "turn"
        while at < len(histories) and histories[at] != expected and \
                not (summary and histories[at][:len(expected)] == expected):
            at += 1
        assert at < len(histories), f"request {n}: the upstream received a conversation the session never had"


def _check_tools_ran(lines: list[dict]) -> None:
    items = [x["payload"] for x in lines if x["type"] == "response_item"]
    calls = {i["call_id"] for i in items if i.get("type") == "function_call" and i.get("name") == "Bash"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    # Every output answers a call; a call may have none when Claude Code compacted right after it (its summary
    # request then leaves the unanswered call out, and the conversation goes on from the summary).
    assert calls & outputs and outputs <= calls


def _compactions(api: Api, session: dict) -> list[dict]:
    rows = api.get(f"sessions/{session['id']}/compactions").json()
    return rows["results"] if isinstance(rows, dict) else rows


def test_claude_code_through_the_gateway_in_upstream_mode_is_recorded_with_its_compactions_call_tokens(
        gateway, tmp_path):
    url, seed, recorded = gateway
    api = Api(url, seed["token"])
    run = ClaudeRun(tmp_path, "upstream", f"{url}/gateway/r/{seed['routes']['upstream']}/anthropic",
                    seed["keys"]["upstream"])
    _drive(run)
    bodies = _received(recorded, run.session_id)
    summary_requests = [b for b in bodies if anthropic_wire.request_kind(anthropic_wire.items_of(b)) != "turn"]
    assert len(summary_requests) >= 3
    session, lines = _wait_recorded(api, run.session_id, bodies, compactions=run.compact_boundaries())
    assert session["source"] == "gateway"
    _check_tools_ran(lines)
    compactions = _compactions(api, session)
    assert len(compactions) >= 3
    assert all(c["method"] == "local" for c in compactions)
    assert "manual" in {c["trigger"] for c in compactions}  # the /compact
    details = [api.get(f"compactions/{c['id']}").json() for c in compactions]
    assert all(d["cost"]["call_tokens"] > 0 for d in details), [d["cost"] for d in details]
    # Each summary Claude Code wrote after a compact boundary is the one the upstream's answer gave.
    written = [e for e in run.transcript() if e.get("isCompactSummary")]
    assert len(written) >= 3
    _check_history_is_what_the_upstream_received(lines, bodies)


def test_claude_code_through_the_gateway_in_compactweb_mode_continues_from_the_policys_summary(gateway, tmp_path):
    url, seed, recorded = gateway
    api = Api(url, seed["token"])
    run = ClaudeRun(tmp_path, "compactweb", f"{url}/gateway/r/{seed['routes']['compactweb']}/anthropic",
                    seed["keys"]["compactweb"])
    _drive(run)
    bodies = _received(recorded, run.session_id)
    # compactweb answered every summary request: the upstream never received one of this session's.
    assert not any(anthropic_wire.request_kind(anthropic_wire.items_of(b)) != "turn" for b in bodies)
    session, lines = _wait_recorded(api, run.session_id, bodies, compactions=run.compact_boundaries())
    _check_tools_ran(lines)
    _check_history_is_what_the_upstream_received(lines, bodies)
    compactions = _compactions(api, session)
    assert len(compactions) >= 3 and all(c["method"] == "local" for c in compactions)
    # Each compaction has the trigger Claude Code gave its compact boundary: the `/compact` manual, the others auto
    # (compactweb answered the summary request, so only that request could say which).
    boundaries = [e["compactMetadata"]["trigger"] for e in run.transcript()
                  if e.get("type") == "system" and e.get("subtype") == "compact_boundary"]
    assert "manual" in boundaries and [c["trigger"] for c in compactions][:len(boundaries)] == boundaries
    # The summary Claude Code continues from is the policy's: each compaction's summary is in the summary entry
    # Claude Code wrote after its compact boundary, and in the first message of the requests it sent next.
    written = [json.dumps(e["message"]["content"]) for e in run.transcript() if e.get("isCompactSummary")]
    summaries = [api.get(f"compactions/{c['id']}").json()["summary"] for c in compactions]
    assert len(written) >= 3
    for summary in summaries[:len(written)]:
        assert summary and any(json.dumps(summary)[1:-1][:200] in w for w in written), summary[:200]
    # The policy's summaries were written with the admin's prompt, by the route's upstream model.
    asked = [r["body"] for r in read_requests(recorded) if r["endpoint"] == "/anthropic/v1/messages"
             and ADMIN_PROMPT in json.dumps(r["body"]["messages"][-1:])]
    assert len(asked) >= len(compactions)
    firsts = {json.dumps(b["messages"][0]["content"]) for b in bodies}
    assert all(any(json.dumps(s)[1:-1][:200] in f for f in firsts) for s in summaries[:len(written)])
