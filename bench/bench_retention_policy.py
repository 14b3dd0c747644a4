"""Benchmark: the database size over a simulated month at a constant load, with and without the retention policy
(issue 34, docs/retention-policy.md).

Each simulated day, `--per-day` new sessions of `--lines` rollout lines each are written and ended; at the end of
the day the archiver runs with the clock at that day's end (`do_run_archiver(now=...)`: nothing sleeps), archiving
and removing every session idle for `--keep-days` days. The same days run twice, each in a fresh throwaway
database in a process of its own: without retention (the floor: the size grows with every day) and with it. After
each day the script reads the database's size: PostgreSQL `pg_database_size` after a plain VACUUM (what autovacuum
does on its own schedule: it makes the removed rows' space reusable, it does not give it back to the system); SQLite `page_count * page_size` (auto_vacuum is off: freed pages go to the
freelist and later inserts reuse them, so the file stops growing but does not shrink; `VACUUM` would shrink it).

    .venv/bin/python bench/bench_retention_policy.py                                      # SQLite
    DATABASE_URL=postgres://.../compactweb_x .venv/bin/python bench/bench_retention_policy.py [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECTION = "## Retention: database size over a simulated month"
VACUUMED = (
    "sessions_app_rolloutline",
    "sessions_app_liveitem",
    "sessions_app_session",
    "sessions_app_contextwindow",
)


def _size(connection) -> tuple[int, int | None]:
    """(database bytes, of which free for reuse: SQLite only) after the day's archiver run."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM")  # the whole database, as autovacuum would in time
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0], None
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.execute("PRAGMA page_size")
        page = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
        return pages * page, free * page


def _write_session(*, title: str, lines: int, provider, policy):
    """A session and its `lines` rollout lines, appended in one call without live events."""
    from bench.turn_setup import history_item
    from sessions_app.rollout.services import NewLine, append_rollout_lines, do_create_session

    session = do_create_session(title=title, provider=provider, policy=policy)
    append_rollout_lines(
        session=session,
        lines=[NewLine("response_item", history_item(i)) for i in range(lines)],
        publish=False,
    )
    return session


def simulate(args) -> None:
    """One mode in this process's throwaway database; prints one JSON line per day."""
    from datetime import UTC, datetime, timedelta

    from django.db import connection

    from bench.turn_setup import provider_and_policy
    from compaction_app.models import RetentionSettings
    from sessions_app.archive.services import do_run_archiver
    from sessions_app.models import RolloutLine, Session, SessionArchive

    provider, policy = provider_and_policy(name="bench-retention", window=100_000_000)
    RetentionSettings.objects.update_or_create(
        pk=1, defaults={"archive_after_days": args.keep_days, "max_sessions_per_run": 100_000}
    )
    start = datetime(2026, 1, 1, tzinfo=UTC)
    write_s = archive_s = 0.0
    archived = 0
    for day in range(1, args.days + 1):
        day_start = start + timedelta(days=day - 1)
        began = time.perf_counter()
        for n in range(args.per_day):
            session = _write_session(
                title=f"day {day} session {n}", lines=args.lines, provider=provider, policy=policy
            )
            ended = day_start + timedelta(seconds=(n + 1) * 86_000 // args.per_day)
            Session.objects.filter(pk=session.pk).update(state=Session.State.STOPPED, updated_at=ended)
        write_s += time.perf_counter() - began
        if args.mode == "with":
            began = time.perf_counter()
            run = do_run_archiver(trigger="bench", now=day_start + timedelta(days=1))
            archive_s += time.perf_counter() - began
            assert run.failed == 0, run.detail
            archived += run.archived
        size, free = _size(connection)
        print(
            json.dumps(
                {
                    "day": day,
                    "bytes": size,
                    "free": free,
                    "sessions": Session.objects.count(),
                    "lines": RolloutLine.objects.count(),
                    "archived": archived,
                    "write_s": write_s,
                    "archive_s": archive_s,
                }
            ),
            flush=True,
        )
    archive_dir = Path(os.environ["COMPACTWEB_VAR_DIR"]) / "archive"
    files = [p.stat().st_size for p in archive_dir.rglob("*.gz")] if archive_dir.exists() else []
    print(
        json.dumps(
            {
                "archive_files": len(files),
                "archive_bytes": sum(files),
                "export_bytes": sum(SessionArchive.objects.values_list("export_bytes", flat=True)),
                "vendor": connection.vendor,
            }
        ),
        flush=True,
    )


def _child(args, mode: str) -> list[dict]:
    command = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--days",
        str(args.days),
        "--per-day",
        str(args.per_day),
        "--lines",
        str(args.lines),
        "--keep-days",
        str(args.keep_days),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode:
        sys.exit(f"the {mode} run failed:\n{result.stdout}\n{result.stderr}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument(
        "--per-day", type=int, default=40, help="sessions written (and ended) per simulated day"
    )
    parser.add_argument("--lines", type=int, default=200, help="rollout lines per session")
    parser.add_argument("--keep-days", type=int, default=7, help="the retention policy's archive_after_days")
    parser.add_argument("--child", choices=("with", "without"), help=argparse.SUPPRESS)
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()
    if args.child:
        from bench.turn_setup import run_on_throwaway

        args.mode = args.child
        run_on_throwaway(simulate, args, prefix="bench-retention-policy-")
        return
    without, with_ = _child(args, "without"), _child(args, "with")
    report(args, without, with_)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f}"


def _free(n: int | None) -> str:
    return "n/a" if n is None else _mb(n)


def report(args, without: list[dict], with_: list[dict]) -> None:
    days_without, days_with = without[:-1], with_[:-1]
    summary = with_[-1]
    plateau = days_with[args.keep_days]  # the first day the archiver removed a day's sessions
    last_with, last_without = days_with[-1], days_without[-1]
    grow_without = last_without["bytes"] / days_without[args.keep_days]["bytes"]
    grow_with = last_with["bytes"] / plateau["bytes"]
    tail = max(args.keep_days, args.days - 10)  # the last ten days (or fewer)
    tail_with = last_with["bytes"] / days_with[tail - 1]["bytes"]
    tail_without = last_without["bytes"] / days_without[tail - 1]["bytes"]
    per_session_write = last_with["write_s"] / (args.days * args.per_day)
    per_session_archive = last_with["archive_s"] / max(1, last_with["archived"])
    shown = sorted(
        {1, args.keep_days, args.keep_days + 1, args.keep_days + 2, *range(10, args.days + 1, 5), args.days}
    )
    rows = "\n".join(
        f"| {d} | {_mb(days_without[d - 1]['bytes'])} | {days_without[d - 1]['sessions']:,} | "
        f"{_mb(days_with[d - 1]['bytes'])} | {_free(days_with[d - 1]['free'])} | {days_with[d - 1]['sessions']:,} | "
        f"{days_with[d - 1]['archived']:,} |"
        for d in shown
        if d <= args.days
    )
    database = (
        "PostgreSQL (`pg_database_size` after a plain VACUUM)"
        if summary["vendor"] == "postgresql"
        else ("SQLite (`page_count * page_size`; auto_vacuum off)")
    )
    residual = (last_with["bytes"] - plateau["bytes"]) / max(1, last_with["archived"] - plateau["archived"])
    exported = summary.get("export_bytes", 0)
    block = f"""{SECTION} ({summary["vendor"]})

`bench/bench_retention_policy.py --days {args.days} --per-day {args.per_day} --lines {args.lines} \
--keep-days {args.keep_days}` on {database}. Every simulated day {args.per_day} sessions of {args.lines} rollout
lines are written and ended; then the archiver runs with the clock at the day's end and removes the sessions idle
{args.keep_days} days. Two fresh databases, the same days; sizes in MB after each day.

| day | without retention | sessions | with retention | of it free for reuse | sessions | archived so far |
|---:|---:|---:|---:|---:|---:|---:|
{rows}

- Growth from day {args.keep_days + 1} to day {args.days}: **{grow_with:.2f}×** with retention, against
  **{grow_without:.2f}×** without (the floor, same run); over the last days (day {tail} to {args.days})
  **{tail_with:.2f}×** against **{tail_without:.2f}×**. With retention what still grows is the record kept of
  each archived session (its SessionArchive row, its `archive` audit entry, its line in the run's detail):
  {residual / 1e3:,.1f} kB of database per archived session.
- Archive files: {summary["archive_files"]:,} `.jsonl.gz` files, {_mb(summary["archive_bytes"])} MB for
  {_mb(exported)} MB of exports (the bench's generated lines repeat, so they compress far better than real
  sessions would).
- Archiving took {per_session_archive * 1e3:,.1f} ms per session (export, gzip, fsync, read back and hash, the
  delete): {per_session_archive / per_session_write:.2f}× the {per_session_write * 1e3:,.1f} ms it took to write
  the session (its {args.lines} lines appended in one call) in the same run.
"""
    print(block)
    if args.write:
        from bench.doc_section import write_section

        write_section(f"{SECTION} ({summary['vendor']})", block)


if __name__ == "__main__":
    main()
