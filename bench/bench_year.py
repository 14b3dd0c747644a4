"""Benchmark: a year of history on PostgreSQL (issue 34), scaled to what this machine writes in a few minutes: the
hot pages and API lists against the 300 ms goal.

Writes the year with bench/year_data.py (rollout lines and live items by INSERT ... SELECT over generate_series,
sessions, compactions and attempts by bulk inserts; created and started times spread over the year), ANALYZEs, then
times each page and API through Django's test client (server time: middleware, queries, serializers, templates; no
network), interleaved round by round (medians). The floor is a bare primary-key read of a session, measured in the
same rounds.

    DATABASE_URL=postgres://.../compactweb_x .venv/bin/python bench/bench_year.py    # a throwaway database beside it
    ... bench/bench_year.py --sessions 10000 --lines 90 --long 100000 --compactions 20000 --write
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.turn_setup import run_on_throwaway  # noqa: E402

SECTION = "## A year of history on PostgreSQL"
GOAL_MS = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--lines", type=int, default=90, help="rollout lines of each session but the long one")
    parser.add_argument("--long", type=int, default=100_000, help="lines (and live items) of the long session")
    parser.add_argument("--compactions", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    run_on_throwaway(run, args, prefix="bench-year-")


def run(args) -> None:
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client

    from bench.year_data import seed_year
    from sessions_app.models import RolloutLine, Session

    assert connection.vendor == "postgresql", "set DATABASE_URL to a PostgreSQL server"
    started = time.perf_counter()
    year = seed_year(sessions=args.sessions, lines_per_session=args.lines, long_lines=args.long,
                     compactions=args.compactions)
    seeded_s = time.perf_counter() - started
    lines = RolloutLine.objects.count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        size_mb = cursor.fetchone()[0] / 1e6
    user = User.objects.create_user(username="bench-support", password="x")
    user.groups.add(Group.objects.get(name="support"), Group.objects.get(name="operator"))
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    long, middle = year.long_session, year.session_ids[len(year.session_ids) // 2]
    compaction = year.compaction_ids[len(year.compaction_ids) // 2]
    half = args.long // 2
    from compaction_app.models import CompactionPolicy, Provider

    policy, provider = CompactionPolicy.objects.get(name="year").pk, Provider.objects.get(name="year").pk
    paths = {
        "session list API, newest page (100, the default)": "/api/v1/sessions",
        "session list API, a keyset page half a year back (100)": f"/api/v1/sessions?before={middle}&limit=100",
        f"session page of the {args.long:,}-line session": f"/sessions/{long}/",
        "its older history page (200 items)": f"/sessions/{long}/history/?before={half}",
        "history API, first page (200)": f"/api/v1/sessions/{long}/history?limit=200",
        "history API, a middle page (200)": f"/api/v1/sessions/{long}/history?after={half}&limit=200",
        "inspector (a compaction's page)": f"/compactions/{compaction}/",
        "compaction API": f"/api/v1/compactions/{compaction}",
        "a session's compactions API": f"/api/v1/sessions/{middle}/compactions",
        "a session's attempts API": f"/api/v1/sessions/{middle}/attempts",
        "analytics, last 30 days (default)": "/analytics/",
        "analytics, all time": "/analytics/?period=",
        "analytics, all time, one policy and provider": f"/analytics/?period=&policy={policy}&provider={provider}",
        "analytics API, all time": "/api/v1/analytics?period=",
        f"fleet board, newest first ({args.sessions:,} sessions)": "/?sort=newest",
        "fleet board, nearest the limit first": "/",
    }

    def get(path: str) -> None:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1000

    from sessions_app.compactions import retention
    from sessions_app.compactions.analytics import compaction_analytics

    def all_time(exact: bool) -> None:
        compaction_analytics(exact=exact)
        for by in ("strategy", "policy", "model", "day"):
            retention.retention_rollup(by=by, exact=exact)

    # The all-time figures themselves (no page around them), from the roll-up and recomputed from the records (the
    # computation the page ran before the roll-up, issue 34): before and after in the same run.
    computations = {"all-time figures from the roll-up": lambda: all_time(False),
                    "all-time figures recomputed from the records (before the roll-up)": lambda: all_time(True)}
    for path in paths.values():  # warm the templates and the connection
        get(path)
    times: dict[str, list[float]] = {name: [] for name in [*paths, *computations, "floor"]}
    for _ in range(args.rounds):
        times["floor"].append(timed(lambda: Session.objects.filter(pk=middle).values("id", "last_seq").first()))
        for name, path in paths.items():
            times[name].append(timed(lambda path=path: get(path)))
        for name, compute in computations.items():
            times[name].append(timed(compute))
    med = {name: statistics.median(values) for name, values in times.items()}
    floor = med["floor"]
    out = [
        SECTION, "",
        f"`bench/bench_year.py`: {args.sessions:,} sessions over a year, {lines:,} rollout lines (one session of "
        f"{args.long:,} lines and live items), {args.compactions:,} compactions and attempts; database "
        f"{size_mb:,.0f} MB, written in {seeded_s:.0f} s (of which the analytics roll-up's backfill from the "
        f"records, `rebuild_analytics_rollup`, {year.rollup_rebuilt_s:.1f} s). Server time through Django's test "
        f"client, median of {args.rounds} interleaved rounds. Goal: {GOAL_MS} ms each. Floor: a bare primary-key read, "
        f"{floor:.2f} ms.", "",
        "| page / API | ms | × floor | goal |",
        "|---|---:|---:|---|",
        *(f"| {name} | {med[name]:.1f} | {med[name] / floor:.0f}× | {'met' if med[name] < GOAL_MS else 'MISSED'} |"
          for name in paths),
        *(f"| {name} | {med[name]:.1f} | {med[name] / floor:.0f}× | |" for name in computations),
    ]
    print("\n".join(out))
    if args.write:
        from bench.doc_section import write_section

        write_section(SECTION, "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
