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
import subprocess
import threading
from pathlib import Path

import pytest

from compaction_app.models import Compaction
from compaction_app.providers.simulated.recording import read_requests
from sessions_app.models import CodexSource, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import do_append_items
from sessions_app.transfer import exporter, importer
from sessions_app.transfer.follow import Follower
from tests.live_dashboard import cli_folder, histories_after, installed_cli_or_skip, live_dashboard, wait_for

HERE = Path(__file__).resolve().parent
CLI_FOLDER = cli_folder(HERE, "COMPACTWEB_CODEX_CLI_DIR")
CODEX = CLI_FOLDER / "node_modules" / ".bin" / "codex"
PINNED = json.loads((CLI_FOLDER / "package.json").read_text())["devDependencies"]["@openai/codex"]
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
    folder = "tests/codex_cli" if CLI_FOLDER == HERE else str(CLI_FOLDER)
    return installed_cli_or_skip(CODEX, PINNED, name="Codex CLI", folder=folder)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    """A live dashboard (Daphne) whose simulated model records every request; yields (base URL, token, dir)."""
    _codex_or_skip()
    with live_dashboard(tmp_path_factory.mktemp("dashboard")) as (url, token, requests):
        yield f"{url}/sim/v1", token, requests


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


def _wire(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in WIRE_ONLY_FIELDS}


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
        wait_for(lambda: CodexSource.objects.filter(line_count=lines).exists(),
                 what="the follower catching up with Codex's rollout")
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
    histories = histories_after(session, lambda items: [_wire(i) for i in items])
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
