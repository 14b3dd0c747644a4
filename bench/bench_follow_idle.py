"""Benchmark: an idle folder follower, and the cost of one appended line (issue 30).

A Codex sessions tree of 1,000 small rollout files (`--files`) is imported once (`manage.py follow_rollouts
--once`), then `manage.py follow_rollouts DIR` runs as a user runs it, in its own process. Once it says it has
caught up, its CPU time (user + system, from /proc/PID/stat) is read over `--seconds` (60 by default) while
nothing is written. Beside it, in the same window, runs the floor: a plain Python process doing what the
follower's safety net must do at least, listing the tree and stat-ing every file every rescan period. Then one
line is appended to one file, `--appends` times, and the follower's CPU time per appended line is read, once
for a small file and once for a big one (`--big-lines`): the work must follow the line, not the file.

    .venv/bin/python bench/bench_follow_idle.py                    # prints the table (about 2 to 3 minutes)
    .venv/bin/python bench/bench_follow_idle.py --files 200 --seconds 20
    .venv/bin/python bench/bench_follow_idle.py --write            # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.doc_section import write_section  # noqa: E402

SECTION = "## An idle folder follower"
TICKS = os.sysconf("SC_CLK_TCK")
RESCAN = 5.0
SMALL_TURNS = 4


def _line(kind: str, payload: dict, n: int) -> str:
    stamp = f"2026-12-01T08:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload}, separators=(",", ":")) + "\n"


def _turn(n: int) -> list[str]:
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"fix bug {n}"}]}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"fixed {n}. " * 8}]}
    return [_line("response_item", user, n), _line("response_item", answer, n)]


def write_rollout(path: Path, turns: int) -> None:
    meta = {"id": str(uuid.uuid4()), "timestamp": "2026-12-01T08:00:00.000Z", "cwd": "/home/dev/p",
            "originator": "codex_exec", "cli_version": "0.169.0", "source": "exec", "model_provider": "openai",
            "base_instructions": {"text": "You are a coding agent. " * 50}}
    with path.open("w", encoding="utf-8") as fh:
        fh.write(_line("session_meta", meta, 0))
        for n in range(turns):
            fh.writelines(_turn(n))


def make_tree(root: Path, files: int, big_lines: int) -> tuple[Path, Path]:
    paths = []
    for i in range(files):
        day = root / "2026" / "12" / f"{i // 100 + 1:02d}"
        day.mkdir(parents=True, exist_ok=True)
        path = day / f"rollout-2026-12-01T08-00-00-{uuid.uuid4()}.jsonl"
        write_rollout(path, big_lines // 2 if i == 0 else SMALL_TURNS)
        paths.append(path)
    return paths[1], paths[0]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _env(db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "COMPACTWEB_RUN_SIMULATOR")}
    env.update(SQLITE_PATH=str(db), COMPACTWEB_VAR_DIR=str(db.parent), DJANGO_SETTINGS_MODULE="compactweb.settings",
               LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
    return env


def _manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True)


DEFAULTS = """
from compaction_app.models import CompactionPolicy, Provider
Provider.objects.get_or_create(name="bench", defaults={"base_url": Provider.EMBEDDED, "model": "sim-1",
                                                       "context_window": 272_000})
CompactionPolicy.objects.get_or_create(name="bench")
"""

FLOOR = """
import os, sys, time
from pathlib import Path
root, rescan, seconds = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
start, end = time.process_time(), time.monotonic() + seconds
while time.monotonic() < end:
    for f in sorted(root.rglob("rollout-*.jsonl")):
        os.stat(f)
    time.sleep(rescan)
print(time.process_time() - start)
"""


def _source_lines(db: Path, path: Path) -> int:
    with sqlite3.connect(db) as con:
        row = con.execute("SELECT line_count FROM sessions_app_codexsource WHERE path = ?",
                          (str(path.resolve()),)).fetchone()
    return row[0] if row else 0


def _wait(condition, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("the follower did not catch up")
        time.sleep(0.02)


def per_append(follower: subprocess.Popen, db: Path, path: Path, appends: int) -> float:
    """The follower's CPU seconds per line appended to `path`, one line at a time (after one not counted: the
    first append loads what an idle follower never needed)."""
    start = 0.0
    for n in range(appends + 1):
        if n == 1:
            start = cpu_seconds(follower.pid)
        before = _source_lines(db, path)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(_turn(10_000 + n)[1])
        _wait(lambda before=before: _source_lines(db, path) > before)
    return (cpu_seconds(follower.pid) - start) / appends


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--appends", type=int, default=20)
    parser.add_argument("--big-lines", type=int, default=20_000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-follow-") as name:
        tmp = Path(name)
        root, db = tmp / "sessions", tmp / "bench.sqlite3"
        small, big = make_tree(root, args.files, args.big_lines)
        env = _env(db)
        _manage("migrate", env=env)
        _manage("shell", "-c", DEFAULTS, env=env)
        started = time.perf_counter()
        _manage("follow_rollouts", str(root), "--once", env=env)
        imported = time.perf_counter() - started
        follower = subprocess.Popen([sys.executable, "manage.py", "follow_rollouts", str(root), "--rescan", str(RESCAN)],
                                    cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        try:
            for line in follower.stdout:
                if line.startswith("caught up"):
                    break
            floor = subprocess.Popen([sys.executable, "-c", FLOOR, str(root), str(RESCAN), str(args.seconds)],
                                     stdout=subprocess.PIPE, text=True)
            idle_start, wall = cpu_seconds(follower.pid), time.monotonic()
            floor_cpu = float(floor.communicate()[0].strip())
            idle = cpu_seconds(follower.pid) - idle_start
            elapsed = time.monotonic() - wall
            small_line = per_append(follower, db, small, args.appends)
            big_line = per_append(follower, db, big, args.appends)
        finally:
            follower.terminate()
            follower.wait(timeout=30)
    table = [
        f"{args.files:,} rollout files; {platform.python_implementation()} {platform.python_version()}, SQLite, "
        f"{os.cpu_count()} cores shared; rescan every {RESCAN:.0f} s; importing them all once took {imported:.0f} s.",
        "",
        "| run | CPU seconds | share of a core | × floor |",
        "|---|---:|---:|---:|",
        f"| floor: list the tree and stat every file every {RESCAN:.0f} s, {elapsed:.0f} s | {floor_cpu:.2f} | "
        f"{floor_cpu / elapsed:.2%} | 1.0 |",
        f"| idle `follow_rollouts`, {elapsed:.0f} s | {idle:.2f} | {idle / elapsed:.2%} | "
        f"{idle / max(floor_cpu, 1 / TICKS):.1f} |",
        "",
        "| one appended line | follower CPU per line (ms) |",
        "|---|---:|",
        f"| to a file of {1 + 2 * SMALL_TURNS} lines | {small_line * 1000:.1f} |",
        f"| to a file of {args.big_lines + 1:,} lines | {big_line * 1000:.1f} |",
    ]
    print("\n".join(table))
    if args.write:
        block = (f"{SECTION}\n\n`bench/bench_follow_idle.py` (issue 30): `manage.py follow_rollouts` run as a user "
                 "runs it, its CPU time read from /proc while the folder is idle, against a floor process that only "
                 "lists and stats the tree as often; then its CPU time per line appended to a small and to a big "
                 "file. Target: under 1% of a core idle, and the same cost per line whatever the file's size.\n\n"
                 + "\n".join(table) + "\n")
        write_section(SECTION, block)


if __name__ == "__main__":
    main()
