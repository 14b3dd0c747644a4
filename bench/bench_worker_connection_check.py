"""Benchmark: what a worker's connection health check costs per task (issue 42).

A Celery worker keeps its database connection between tasks and, with Django's CONN_HEALTH_CHECKS on
(compactweb/celery.py, `keep_worker_connections`), checks it with one `SELECT 1` before a task's first query
(`close_stale_connections` re-arms the check before each task). This script times what a task pays for that: the
task_prerun hook and the task's first query (a primary-key read, as a simulator step's first is), with the check
on and off, interleaved in rounds on one kept connection, and prints the median per task of each and the
difference. Compare it with a step's bookkeeping (bench/bench_step_bookkeeping.py: about 4.6 ms on PostgreSQL).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/compactweb .venv/bin/python bench/bench_worker_connection_check.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.turn_setup import drop_throwaway, setup_django  # noqa: E402


def measure(*, tasks: int, rounds: int) -> dict[str, list[float]]:
    from django.db import connection

    from compaction_app.models import Provider
    from compactweb.celery import close_stale_connections

    task = SimpleNamespace(request=SimpleNamespace(is_eager=False))
    provider = Provider.objects.create(name="bench-check", base_url=Provider.EMBEDDED, model="sim-1")
    connection.settings_dict["CONN_MAX_AGE"] = 300  # kept between tasks, as keep_worker_connections sets it
    per_task: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode in ("off", "on"):
            connection.settings_dict["CONN_HEALTH_CHECKS"] = mode == "on"
            connection.close()  # the next connect reads both settings
            Provider.objects.filter(pk=provider.pk).exists()
            began = time.perf_counter()
            for _ in range(tasks):
                close_stale_connections(task=task)
                Provider.objects.filter(pk=provider.pk).exists()
            per_task[mode].append((time.perf_counter() - began) / tasks * 1e6)
    return per_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per round and mode")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        throwaway = setup_django(Path(tmp), postgres=True)
        try:
            from django.db import connection

            if connection.vendor != "postgresql":
                raise SystemExit("set DATABASE_URL=postgres://...: the workers' check is for PostgreSQL")
            per_task = measure(tasks=args.tasks, rounds=args.rounds)
            connection.close()
        finally:
            drop_throwaway(throwaway)
    off, on = statistics.median(per_task["off"]), statistics.median(per_task["on"])
    print(f"per task (median of {args.rounds} rounds of {args.tasks}): check off {off:.0f} us, on {on:.0f} us, "
          f"the check {on - off:.0f} us")


if __name__ == "__main__":
    main()
