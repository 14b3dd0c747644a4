"""The real Claude Code CLI against a live dashboard's simulated model (issue 35).

`claude -p` (the pinned @anthropic-ai/claude-code of tests/claude_code/package.json, installed by scripts/test with
`npm ci`) runs in a scratch folder against `/sim/anthropic` of a Daphne subprocess, continuing one session
(`--continue`) prompt after prompt, with its auto-compaction window set small (CLAUDE_CODE_AUTO_COMPACT_WINDOW at
its 100k minimum, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE) so it compacts every few prompts, and one `/compact`.
compactweb follows its projects folder live (the watchdog Follower, in this process; stopped and restarted in the
middle), and the test checks: every compact boundary Claude Code wrote is a compaction with its trigger, the live
history after each compaction is what Claude Code sent next (the simulated model records what it received),
the Bash tool ran, the server's usage is kept, and across the follower restart nothing is lost or doubled (the
followed session equals a fresh import of the file, and its export is the file byte for byte).

Cost: about 10-20 s of wall time (seven short `claude -p` runs). Without node or the installed CLI the test is
skipped with the reason, except under CI, where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from compaction_app.models import Compaction
from compaction_app.providers.simulated import anthropic
from compaction_app.providers.simulated.recording import read_requests
from sessions_app.models import CodexSource, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.transfer import claude_follow, exporter, importer
from sessions_app.transfer.follow import Follower
from tests.live_dashboard import cli_folder, histories_after, installed_cli_or_skip, live_dashboard, wait_for

HERE = Path(__file__).resolve().parent
CLI_FOLDER = cli_folder(HERE, "COMPACTWEB_CLAUDE_CODE_CLI_DIR")
CLAUDE = CLI_FOLDER / "node_modules" / ".bin" / "claude"
PINNED = json.loads((CLI_FOLDER / "package.json").read_text())["devDependencies"]["@anthropic-ai/claude-code"]
# Claude Code's system prompt and Bash tool are about 8.7k tokens: at 13% of the 80k usable window (100k minus
# its 20k output reserve) it compacts once a few prompts have added about 1.7k tokens.
AUTO_COMPACT_WINDOW, PCT = "100000", "13"
FILLER = " ".join(f"note {i}: the parser keeps line {i} of the loader notes as it was read." for i in range(30))
PROMPTS = [
    "please fix parser bug number 3 in the notes",
    "now write the docs for the loader module",
    "check the tests for the parser and report",
    "/compact",
    "add a changelog entry for the parser fix",
    "review the loader docs again",
    "fix the parser notes once more",
]
RESTART_AFTER = 3  # the follower is stopped after this many prompts and started again two prompts later

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    """A live dashboard (Daphne) whose simulated model records every request; yields (base URL, token, dir)."""
    installed_cli_or_skip(CLAUDE, PINNED, name="Claude Code CLI",
                          folder="tests/claude_code" if CLI_FOLDER == HERE else str(CLI_FOLDER))
    with live_dashboard(tmp_path_factory.mktemp("dashboard")) as (url, token, requests):
        yield f"{url}/sim/anthropic", token, requests


def _env(home: Path, base_url: str, token: str) -> dict[str, str]:
    """Claude Code pointed at the simulated model only: its own home, no telemetry, no other traffic."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_"))}
    env.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"), ANTHROPIC_BASE_URL=base_url,
               ANTHROPIC_API_KEY=token, DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
               DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1", NO_COLOR="1",
               CLAUDE_CODE_AUTO_COMPACT_WINDOW=AUTO_COMPACT_WINDOW, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=PCT)
    return env


def _run(prompt: str, *, scratch: Path, env: dict[str, str], first: bool) -> dict:
    text = prompt if prompt.startswith("/") else f"{prompt}. {FILLER}"
    args = [str(CLAUDE), "-p", text, "--model", "claude-sonnet-4-5", "--tools", "Bash", "--allowedTools", "Bash",
            "--output-format", "json", *([] if first else ["--continue"])]
    result = subprocess.run(args, cwd=scratch, env=env, capture_output=True, text=True, timeout=180,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    return json.loads(result.stdout)


class _Following:
    """A Follower on its own thread, to start and stop."""

    def __init__(self, root: Path) -> None:
        self.follower = Follower(root, rescan_seconds=1.0)
        self.thread = threading.Thread(target=self.follower.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.follower.stop()
        self.thread.join(timeout=10)


def _caught_up(path: Path) -> bool:
    lines = path.read_bytes().count(b"\n")
    return CodexSource.objects.filter(path=str(path.resolve()), line_count=lines).exists()


# -- what Claude Code sent, compared with compactweb's history ---------------------------------------------------


def _merged(items: list[dict]) -> list[dict]:
    """Claude Code sends consecutive messages of one role as one message, ending every joined text but the last
    with a newline: compare messages joined the same way, without the trailing newlines of their parts."""
    out: list[dict] = []
    for item in items:
        if item.get("type") == "message":
            parts = [{**c, "text": c["text"].rstrip("\n")} if "text" in c else c for c in item["content"]]
            item = {"type": "message", "role": item["role"], "content": parts}
            if out and out[-1].get("type") == "message" and out[-1]["role"] == item["role"]:
                out[-1] = {**out[-1], "content": [*out[-1]["content"], *parts]}
                continue
        out.append(item)
    return out


def _sent(body: dict) -> list[dict]:
    """A request's conversation as the simulated model reads it (without Claude Code's <system-reminder> blocks,
    context it adds to user messages on every request, which the transcript keeps as attachment entries)."""
    return _merged(anthropic.messages_to_items(body["messages"]))


def _session_requests(recorded: Path, session_id: str) -> list[dict]:
    out = []
    for request in read_requests(recorded):
        body = request["body"]
        user = json.loads((body.get("metadata") or {}).get("user_id") or "{}")
        if request["endpoint"] == "/anthropic/v1/messages" and user.get("session_id") == session_id:
            out.append(body)
    return out


def _check_history_is_what_claude_sent_next(session: Session, requests: list[dict]) -> int:
    """For each compaction: the first request after Claude Code's summary request whose conversation starts with
    that compaction's summary (the request Claude Code sent next, with the new history) is one of compactweb's
    histories between that compaction and the next. Claude Code may send a summary request twice, or ahead of
    time, so requests are matched by their first message, not counted. Returns how many compactions had a next
    request (the session may end right after one)."""
    compactions = list(Compaction.objects.filter(session=session).order_by("rollout_seq")
                       .values_list("rollout_seq", flat=True))
    histories = histories_after(session, _merged)
    sent = [_sent(r) for r in requests]
    summary_requests = [n for n, items in enumerate(sent) if anthropic.is_summary_request(items)]
    assert len(summary_requests) >= len(compactions)
    checked, start = 0, 0
    for n, seq in enumerate(compactions):
        end = compactions[n + 1] if n + 1 < len(compactions) else None
        candidates = [h for s, h in histories if s >= seq and (end is None or s < end)]
        summary = candidates[0][0]
        after = next((k for k in summary_requests if k >= start), None)
        assert after is not None, f"no summary request for compaction {n + 1}"
        following = next((k for k in range(after + 1, len(sent)) if sent[k] and sent[k][0] == summary
                          and not anthropic.is_summary_request(sent[k])), None)
        if following is None:
            continue  # the session ended right after this compaction
        assert sent[following] in candidates, \
            f"compactweb's history after compaction {n + 1} is not what Claude Code sent next"
        checked += 1
        start = following
    return checked


def _comparable(session: Session) -> list[tuple[str, dict]]:
    return [(kind, payload) for kind, payload in RolloutLine.objects.filter(session=session).exclude(
        kind=p.SESSION_META).order_by("seq").values_list("kind", "payload")]


def test_claude_code_compacts_against_the_simulated_model_and_compactweb_follows_it_across_a_restart(
    dashboard, tmp_path, provider, policy
):
    base_url, token, recorded = dashboard
    home, scratch = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    scratch.mkdir()
    env = _env(home, base_url, token)
    projects = home / ".claude" / "projects"
    projects.mkdir(parents=True)

    following = _Following(projects)
    results = []
    try:
        for n, prompt in enumerate(PROMPTS):
            if n == RESTART_AFTER:
                following.stop()  # Claude Code goes on writing while nobody follows
                claude_follow.forget_readers()  # a new process: no reader kept in memory
            if n == RESTART_AFTER + 2:
                following = _Following(projects)
            results.append(_run(prompt, scratch=scratch, env=env, first=n == 0))
        (path,) = [f for f in projects.rglob("*.jsonl") if f.parent.parent == projects]
        wait_for(lambda: _caught_up(path), what="the follower catching up with Claude Code's transcript")
    finally:
        following.stop()

    session_id = results[0]["session_id"]
    assert {r["session_id"] for r in results} == {session_id}  # --continue kept one session and one file
    session = Session.objects.get(source="followed")
    assert str(session.thread_id) == session_id
    data = path.read_bytes()
    entries = [json.loads(line) for line in data.splitlines() if line.strip()]

    # Every compact boundary Claude Code wrote is a compaction, with its trigger, in order.
    boundaries = [e for e in entries if e.get("type") == "system" and e.get("subtype") == "compact_boundary"]
    triggers = [b["compactMetadata"]["trigger"] for b in boundaries]
    assert "manual" in triggers and triggers.count("auto") >= 2, triggers
    compactions = list(Compaction.objects.filter(session=session).order_by("rollout_seq"))
    assert [c.trigger for c in compactions] == triggers
    assert all(c.implementation == "responses" and c.summary.startswith("This session is being continued")
               for c in compactions)
    assert [c.inferred.get("pre_tokens") for c in compactions] == [
        f"Claude Code counted {b['compactMetadata']['preTokens']:,} tokens before compacting" for b in boundaries]
    manual = compactions[triggers.index("manual")]
    assert (manual.phase, manual.reason) == ("standalone_turn", "user_requested")
    # Each compaction's summary requests (no transcript entry of their own; counted by the run's cost-state) are
    # its call tokens: at least one request carrying the whole pre-compaction context.
    assert all(c.call_tokens >= b["compactMetadata"]["preTokens"] for c, b in zip(compactions, boundaries, strict=True)), [
        (c.call_tokens, b["compactMetadata"]["preTokens"]) for c, b in zip(compactions, boundaries, strict=True)]

    # The live history after each compaction is what Claude Code sent next.
    requests = _session_requests(recorded, session_id)
    assert _check_history_is_what_claude_sent_next(session, requests) >= 3

    # The Bash tool ran, and every call has its output in the history's lines.
    items = [payload for kind, payload in _comparable(session) if kind == p.RESPONSE_ITEM]
    calls = {i["call_id"] for i in items if i["type"] == "function_call" and i["name"] == "Bash"}
    outputs = {i["call_id"] for i in items if i["type"] == "function_call_output"}
    assert calls and calls <= outputs

    # The server's usage, once per assistant message, labelled as the server's.
    usage = [payload for kind, payload in _comparable(session)
             if kind == p.EVENT_MSG and payload.get("type") == "token_count"]
    message_ids = {e["message"]["id"] for e in entries if e.get("type") == "assistant" and not e.get("isSidechain")}
    assert len(usage) == len(message_ids) and {u["source"] for u in usage} == {"server"}

    # Nothing lost or doubled across the restart: the followed session is a fresh import of the whole file, and
    # its export is the file byte for byte.
    fresh = importer.do_import_rollout(lines=data.splitlines(keepends=True), source_name=path.name,
                                       new_thread_id=True).session
    assert _comparable(session) == _comparable(fresh)
    assert "".join(exporter.export_rollout(session=session)).encode() == data
