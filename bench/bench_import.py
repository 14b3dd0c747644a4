"""Benchmark: importing a big Codex rollout, against its floor (issue 13, item 5).

The file is synthetic but shaped like a real Codex 0.169 session (turns of task_started, turn_context, a user
message, reasoning, an exec_command call and its output, token_count events, an answer, task_complete; a local
compaction every 400 turns), about 52 MB and 149k lines by default, the size of the session that took 4 min 9 s
and 599 MB before.

- floor: `json.loads` of every line plus a bulk insert of the same rows (the rollout lines and the file's lines)
  into a throwaway session, in batches, in one process;
- import: `manage.py import_rollouts FILE` as a user runs it, in a process of its own on a migrated database:
  its seconds include Django's start (about 3 s) and its peak resident memory (ru_maxrss) is the whole
  process's, tokenizer and all (issue 30: measuring the import inside the bench's own process gave lower
  figures than a user sees).

Each is run in a fresh subprocess against a fresh SQLite file; the table gives wall seconds, the ratio to the
floor and the process's peak resident memory.

    .venv/bin/python bench/bench_import.py                 # prints the table (about a minute or two)
    .venv/bin/python bench/bench_import.py --lines 20000   # a smaller file
    .venv/bin/python bench/bench_import.py --write         # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.doc_section import write_section  # noqa: E402

SECTION = "## Importing a big Codex rollout"


def write_rollout(path: Path, lines: int) -> int:
    """A Codex-shaped rollout of about `lines` lines; returns its size in bytes."""
    thread = str(uuid.UUID(int=uuid.uuid4().int))
    ordinal = 0
    turn = 0

    def line(kind: str, payload: dict) -> str:
        nonlocal ordinal
        seconds = ordinal // 10
        stamp = f"2026-12-01T{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{ordinal % 1000:03d}Z"
        text = json.dumps({"timestamp": stamp, "ordinal": ordinal, "type": kind, "payload": payload},
                          separators=(",", ":"))
        ordinal += 1
        return text + "\n"

    output = ("Chunk ID: 1f2e3d\nWall time: 0.05 seconds\nProcess exited with code 0\nOutput:\n"
              + "src/module.py:12: def handle(request):  # the handler that parses the request body\n" * 3)
    history: list[dict] = []
    with path.open("w", encoding="utf-8") as fh:
        fh.write(line("session_meta", {"id": thread, "timestamp": "2026-12-01T00:00:00.000Z", "cwd": "/home/dev/p",
                                       "originator": "codex_exec", "cli_version": "0.169.0", "source": "exec",
                                       "model_provider": "openai",
                                       "base_instructions": {"text": "You are a coding agent. " * 200}}))
        while ordinal < lines:
            turn += 1
            tid = f"turn-{turn}"
            user = {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": f"please fix parser bug number {turn} in the notes"}]}
            call = {"type": "function_call", "name": "exec_command", "call_id": f"call_{turn}",
                    "arguments": json.dumps({"cmd": f"grep -rn handler_{turn} src"})}
            reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"Look at {turn}."}],
                         "content": None, "encrypted_content": "gAAAA" + "x" * 400}
            result = {"type": "function_call_output", "call_id": f"call_{turn}", "output": output}
            answer = {"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": f"Fixed bug {turn}: the handler now checks. " * 4}]}
            usage = {"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": 5000 + turn, "output_tokens": 90, "total_tokens": 5090 + turn},
                "last_token_usage": {"input_tokens": 5000, "output_tokens": 90, "total_tokens": 5090},
                "model_context_window": 258400}, "rate_limits": None}
            fh.write(line("event_msg", {"type": "task_started", "turn_id": tid}))
            fh.write(line("turn_context", {"turn_id": tid, "cwd": "/home/dev/p", "model": "gpt-5-codex",
                                           "approval_policy": "never"}))
            for item in (user, reasoning, call, result):
                fh.write(line("response_item", item))
            fh.write(line("event_msg", usage))
            fh.write(line("response_item", answer))
            fh.write(line("event_msg", usage))
            fh.write(line("event_msg", {"type": "task_complete", "turn_id": tid, "last_agent_message": "done"}))
            history += [user, answer]
            if turn % 400 == 0:
                summary = {"type": "message", "role": "assistant",
                           "content": [{"type": "output_text", "text": "Handoff summary of the work so far."}]}
                fh.write(line("response_item", summary))
                kept = [*history[-6:], summary]
                fh.write(line("compacted", {"message": "Handoff summary of the work so far.",
                                            "replacement_history": kept, "window_number": turn // 400}))
                history = list(kept)
    return path.stat().st_size


# --- the measured runs (each in its own process) --------------------------------------------------------------------


def _setup_django(db: Path) -> None:
    sys.path.insert(0, str(ROOT))
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "COMPACTWEB_RUN_SIMULATOR"):
        os.environ.pop(name, None)
    os.environ["SQLITE_PATH"] = str(db)
    os.environ["COMPACTWEB_VAR_DIR"] = str(db.parent)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")
    os.environ["LOG_LEVEL"] = "WARNING"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _defaults():
    from compaction_app.models import CompactionPolicy, Provider

    provider, _ = Provider.objects.get_or_create(
        name="bench", defaults={"base_url": Provider.EMBEDDED, "model": "sim-1", "context_window": 272_000})
    policy, _ = CompactionPolicy.objects.get_or_create(name="bench")
    return provider, policy


def run_floor(path: Path, db: Path) -> float:
    _setup_django(db)
    from django.db import transaction
    from django.utils import timezone

    from sessions_app.models import CodexSource, CodexSourceLine, RolloutLine, Session

    provider, policy = _defaults()
    start = time.perf_counter()
    session = Session.objects.create(title="floor", provider=provider, policy=policy, thread_id=uuid.uuid4(),
                                     model="m", source="imported")
    source = CodexSource.objects.create(session=session, name=path.name)
    now = timezone.now()
    batch: list[tuple[str, dict, str]] = []
    seq = 0

    def flush() -> None:
        nonlocal seq, batch
        rows, sources = [], []
        for text, obj, _ in batch:
            seq += 1
            rows.append(RolloutLine(session=session, seq=seq, timestamp=now, kind=obj["type"][:32],
                                    payload=obj.get("payload") or {}))
            sources.append(CodexSourceLine(source=source, number=seq, text=text, rollout_seq=seq))
        with transaction.atomic():
            RolloutLine.objects.bulk_create(rows)
            CodexSourceLine.objects.bulk_create(sources)
        batch = []

    with path.open("rb") as fh:
        for raw in fh:
            text = raw.decode("utf-8").rstrip("\n")
            batch.append((text, json.loads(text), ""))
            if len(batch) >= 2000:
                flush()
    flush()
    return time.perf_counter() - start


DEFAULTS = """
from compaction_app.models import CompactionPolicy, Provider
Provider.objects.get_or_create(name="bench", defaults={"base_url": Provider.EMBEDDED, "model": "sim-1",
                                                       "context_window": 272_000})
CompactionPolicy.objects.get_or_create(name="bench")
"""

# Runs the command given as its arguments and prints its wall seconds and peak resident memory (the children's
# ru_maxrss: the command's own process, as /usr/bin/time reports it).
WRAPPER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measure_command(path: Path, tmp: Path) -> dict:
    """`manage.py import_rollouts` on a migrated database with a provider and a policy, as a user runs it."""
    db = tmp / "import.sqlite3"
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "COMPACTWEB_RUN_SIMULATOR")}
    env.update(SQLITE_PATH=str(db), COMPACTWEB_VAR_DIR=str(tmp), DJANGO_SETTINGS_MODULE="compactweb.settings",
               LOG_LEVEL="WARNING")
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=ROOT, check=True, capture_output=True)
    subprocess.run([*manage, "shell", "-c", DEFAULTS], env=env, cwd=ROOT, check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-c", WRAPPER, *manage, "import_rollouts", str(path)], env=env, cwd=ROOT,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child(kind: str, path: str, db: str) -> None:
    seconds = run_floor(Path(path), Path(db))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb}))


def measure(kind: str, path: Path, tmp: Path) -> dict:
    db = tmp / f"{kind}.sqlite3"
    out = subprocess.run([sys.executable, __file__, "--child", kind, str(path), str(db)], capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=149_000)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "PATH", "DB"))
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    with tempfile.TemporaryDirectory(prefix="bench-import-") as name:
        tmp = Path(name)
        path = tmp / "rollout-2026-12-01T00-00-00-bench.jsonl"
        size = write_rollout(path, args.lines)
        count = path.read_bytes().count(b"\n")
        floor = measure("floor", path, tmp)
        imported = measure_command(path, tmp)
    ratio = imported["seconds"] / floor["seconds"]
    table = [
        f"{count:,} lines, {size / 1e6:.1f} MB; {platform.python_implementation()} {platform.python_version()}, "
        f"SQLite, {os.cpu_count()} cores shared.",
        "",
        "| run | seconds | × floor | peak memory (MB) |",
        "|---|---:|---:|---:|",
        f"| floor: json.loads + bulk insert of the same rows | {floor['seconds']:.1f} | 1.0 | {floor['peak_mb']:.0f} |",
        f"| `manage.py import_rollouts` (the whole process) | {imported['seconds']:.1f} | {ratio:.1f} | "
        f"{imported['peak_mb']:.0f} |",
    ]
    print("\n".join(table))
    if args.write:
        block = (f"{SECTION}\n\n`bench/bench_import.py` (issue 13): a Codex-shaped rollout imported through "
                 "`manage.py import_rollouts`, against the floor of parsing its JSON and bulk-inserting the same rows. "
                 "Target: at most 3× the floor and under 200 MB peak.\n\n" + "\n".join(table) + "\n")
        write_section(SECTION, block)


if __name__ == "__main__":
    main()
