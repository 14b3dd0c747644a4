"""The real Codex CLI against a live dashboard's simulated model (issue 13, items 6 and 7).

`codex exec` (the pinned @openai/codex of tests/codex_cli/package.json, installed by scripts/test with `npm ci`)
runs in a scratch folder against `/sim/v1` of a Daphne subprocess, with a small `model_context_window` so that
it compacts within a few turns: once as a custom provider (Codex compacts locally) and once as the built-in
openai provider with `openai_base_url` overridden (remote v2). compactweb follows its sessions folder live (the
watchdog Follower, in this process), and the test checks: tool calls executed, compactions imported with the
labels Codex ran them with, the live history after each compaction equal to the `input` of Codex's next request
(the simulated model records what it received), and `codex exec resume` accepting compactweb's export.

Cost: about 15-30 s of wall time (a dozen short `codex exec` runs). Without node or the installed CLI the tests
are skipped with the reason, except under CI, where they fail.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from compaction_app.models import Compaction
from compaction_app.providers.simulated.recording import read_requests
from sessions_app.models import CodexSource, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import do_append_items
from sessions_app.transfer import exporter, importer
from sessions_app.transfer.follow import Follower

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CODEX = HERE / "node_modules" / ".bin" / "codex"
PINNED = json.loads((HERE / "package.json").read_text())["devDependencies"]["@openai/codex"]
WINDOW, LIMIT = 8000, 5600  # Codex's own base instructions are about 4.6k tokens: it compacts by turn 4 or so
PROMPTS = [
    "please fix parser bug number 3 in the notes",
    "now write the docs for the loader module",
    "check the tests for the parser and report",
    "add a changelog entry for the parser fix",
    "review the loader docs again",
    "fix the parser notes once more",
    "summarise the work so far",
]
WIRE_ONLY_FIELDS = ("id", "internal_chat_message_metadata_passthrough")

pytestmark = pytest.mark.django_db(transaction=True)


def _codex_or_skip() -> Path:
    problem = None
    if shutil.which("node") is None:
        problem = "node is not installed"
    elif not CODEX.exists():
        problem = "the Codex CLI is not installed: run `npm ci --prefix tests/codex_cli` (scripts/test does)"
    else:
        version = subprocess.run([str(CODEX), "--version"], capture_output=True, text=True, timeout=60).stdout
        if PINNED not in version:
            problem = f"tests/codex_cli has {version.strip()!r}, not the pinned {PINNED}: run `npm ci --prefix tests/codex_cli`"
    if problem is None:
        return CODEX
    if os.environ.get("CI"):
        pytest.fail(f"{problem}; CI must run the Codex CLI end-to-end test")
    pytest.skip(problem)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    """A live dashboard (Daphne) whose simulated model records every request; yields (base URL, token, dir)."""
    _codex_or_skip()
    work = tmp_path_factory.mktemp("dashboard")
    token = secrets.token_hex(16)
    port = _free_port()
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
        yield f"http://127.0.0.1:{port}/sim/v1", token, work / "requests"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class CodexRun:
    """One CODEX_HOME and scratch folder; `exec` runs a turn (the first starts the session, later ones resume)."""

    def __init__(self, home: Path, scratch: Path, env: dict[str, str]) -> None:
        self.home, self.scratch, self.env = home, scratch, env
        self.turns = 0

    def exec(self, prompt: str, *, resume: str | None = None) -> subprocess.CompletedProcess:
        args = [str(CODEX), "exec", "--skip-git-repo-check", "-s", "workspace-write"]
        if resume:
            args += ["resume", resume]
        elif self.turns:
            args += ["resume", "--last"]
        result = subprocess.run([*args, prompt], cwd=self.scratch, env=self.env, capture_output=True, text=True,
                                timeout=120, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr[-3000:]
        self.turns += 1
        return result

    def rollout_files(self) -> list[Path]:
        return sorted((self.home / "sessions").rglob("rollout-*.jsonl"))

    def compactions_in_file(self) -> int:
        return sum(f.read_text().count('"type":"compacted"') for f in self.rollout_files())


def _codex(tmp_path, base_url: str, token: str, *, custom_provider: bool, name: str) -> CodexRun:
    home, scratch = tmp_path / f"{name}-home", tmp_path / f"{name}-work"
    home.mkdir()
    scratch.mkdir()
    common = f'model = "compactweb-sim"\nmodel_context_window = {WINDOW}\nmodel_auto_compact_token_limit = {LIMIT}\n'
    if custom_provider:
        config = (common + 'model_provider = "sim"\n[model_providers.sim]\nname = "compactweb simulated model"\n'
                  f'base_url = "{base_url}"\nwire_api = "responses"\nenv_key = "COMPACTWEB_SIM_TOKEN_FOR_CODEX"\n')
    else:
        config = common + f'model_provider = "openai"\nopenai_base_url = "{base_url}"\n'
    (home / "config.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update(CODEX_HOME=str(home), COMPACTWEB_SIM_TOKEN_FOR_CODEX=token, CODEX_API_KEY=token,
               OPENAI_API_KEY=token, NO_COLOR="1", RUST_LOG="error")
    return CodexRun(home, scratch, env)


def _wait(condition, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the follower did not catch up with Codex's rollout")
        time.sleep(0.05)


def _wire(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in WIRE_ONLY_FIELDS}


def _histories_after(session: Session) -> list[tuple[int, list[dict]]]:
    """(seq, live history after that line) for every rollout line: compactweb's view as it followed."""
    projection = p.Projection()
    out = []
    rows = RolloutLine.objects.filter(session=session).order_by("seq").values_list(
        "seq", "kind", "payload", "tokens", "item_tokens")
    for seq, kind, payload, tokens, item_tokens in rows:
        projection.apply(p.Line(seq=seq, kind=kind, payload=payload, tokens=tokens, item_tokens=item_tokens))
        out.append((seq, [_wire(i) for i in projection.items]))
    return out


def _is_compaction_request(body: dict, *, custom_provider: bool) -> bool:
    items = body.get("input") or []
    if custom_provider:
        return not body.get("tools")  # Codex's local summarization request offers no tools
    return bool(items) and items[-1].get("type") == "compaction_trigger"


def _drive_until_compacted(run: CodexRun, follower_root: Path) -> Session:
    follower = Follower(follower_root, rescan_seconds=1.0)
    thread = threading.Thread(target=follower.run, daemon=True)
    thread.start()
    try:
        for prompt in PROMPTS:
            run.exec(prompt)
            if run.compactions_in_file() >= 1 and run.turns >= 3:
                break
        (path,) = run.rollout_files()
        lines = path.read_bytes().count(b"\n")
        _wait(lambda: CodexSource.objects.filter(line_count=lines).exists())
    finally:
        follower.stop()
        thread.join(timeout=10)
    return Session.objects.get(source="followed")


def _check_tools_ran(run: CodexRun, session: Session) -> None:
    outputs = [line.payload for line in RolloutLine.objects.filter(session=session, kind=p.RESPONSE_ITEM)
               if line.payload.get("type") == "function_call_output"]
    assert outputs, "the simulated model made no tool call"
    assert all("failed to parse function arguments" not in str(o["output"]) for o in outputs)
    assert any("Process exited with code 0" in str(o["output"]) for o in outputs)
    assert (run.scratch / "notes.txt").exists()  # written by an exec_command the model asked for


def _check_history_is_codexs_next_input(session: Session, requests: list[dict], *, custom_provider: bool) -> None:
    thread = str(session.thread_id)
    mine = [r["body"] for r in requests if r["headers"].get("thread-id", thread) == thread
            or r["headers"].get("session-id") == thread]
    histories = _histories_after(session)
    compacted_seqs = list(Compaction.objects.filter(session=session).order_by("rollout_seq")
                          .values_list("rollout_seq", flat=True))
    marks = [i for i, body in enumerate(mine) if _is_compaction_request(body, custom_provider=custom_provider)]
    assert len(marks) == len(compacted_seqs) >= 1
    for n, (mark, seq) in enumerate(zip(marks, compacted_seqs, strict=True)):
        following = mine[mark + 1]["input"]
        base, wire = following[0], [_wire(i) for i in following[1:]]
        # Codex sends its base instructions first, as a developer message that is not part of the history.
        assert base["role"] == "developer" and base["content"][0]["text"].startswith("You are")
        end = compacted_seqs[n + 1] if n + 1 < len(compacted_seqs) else None
        candidates = [h for s, h in histories if s >= seq and (end is None or s < end)]
        assert wire in candidates, "compactweb's history after the compaction is not what Codex sent next"


def test_codex_with_a_custom_provider_compacts_locally_and_compactweb_follows_it(dashboard, tmp_path, provider, policy):
    base_url, token, recorded = dashboard
    run = _codex(tmp_path, base_url, token, custom_provider=True, name="custom")
    session = _drive_until_compacted(run, run.home / "sessions")
    _check_tools_ran(run, session)
    compactions = list(Compaction.objects.filter(session=session))
    assert compactions and {(c.implementation, c.trigger) for c in compactions} == {("responses", "auto")}
    assert {c.phase for c in compactions} <= {"pre_turn", "mid_turn"} and all(c.inferred for c in compactions)
    assert session.provider.usable_context_window == int(WINDOW * 0.95)
    _check_history_is_codexs_next_input(session, read_requests(recorded), custom_provider=True)


def test_codex_with_the_openai_provider_compacts_remotely_v2_and_resumes_compactwebs_export(
    dashboard, tmp_path, provider, policy
):
    base_url, token, recorded = dashboard
    run = _codex(tmp_path, base_url, token, custom_provider=False, name="openai")
    session = _drive_until_compacted(run, run.home / "sessions")
    _check_tools_ran(run, session)
    compactions = list(Compaction.objects.filter(session=session))
    assert compactions and {c.implementation for c in compactions} == {"responses_compaction_v2"}
    assert all(c.strategy == "remote_v2" and c.trigger == "auto" for c in compactions)
    _check_history_is_codexs_next_input(session, read_requests(recorded), custom_provider=False)

    # compactweb's export, with a line compactweb added after an import, resumes in a fresh Codex home.
    (path,) = run.rollout_files()
    imported = importer.do_import_rollout(lines=path.read_bytes().splitlines(keepends=True),
                                          source_name=path.name, new_thread_id=True).session
    note = {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "remember the word pineapple"}]}
    do_append_items(session=imported, items=[note])
    exported = "".join(exporter.export_rollout(session=imported))
    assert exported.startswith(path.read_text())
    fresh = _codex(tmp_path, base_url, token, custom_provider=False, name="resumed")
    target = fresh.home / "sessions" / path.relative_to(run.home / "sessions")
    target.parent.mkdir(parents=True)
    target.write_text(exported)
    before = len(read_requests(recorded))
    fresh.exec("what was the word?", resume=str(session.thread_id))
    sent = read_requests(recorded)[before:]
    assert sent, "codex exec resume sent nothing"
    first = [_wire(i) for i in sent[0]["body"]["input"]]
    assert _wire(note) in first  # compactweb's line came back through Codex's own resume
    assert first[-1]["content"][0]["text"] == "what was the word?"
