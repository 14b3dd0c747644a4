"""Benchmark: what keeping the analytics roll-up costs a compaction (issue 34), in one run.

A manual compaction (`do_compact_session`, the token-budget method on the embedded provider: no model call, so the
compaction's own bookkeeping is what is timed) of a session holding a few hundred items, with the roll-up's
bookkeeping (compaction_app.rollup: each record write's shares before and after, one upsert per roll-up table) and
with it switched off (the floor: the same compaction writing only its records), interleaved one by one; medians,
and the SQL statements of each. Per-turn appends never write compaction records, so they do not pay it (confirm
with bench_turn_floor.py).

    .venv/bin/python bench/bench_rollup_write.py                 # SQLite
    DATABASE_URL=postgres://.../compactweb_x .venv/bin/python bench/bench_rollup_write.py   # a throwaway beside it
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.turn_setup import run_on_throwaway  # noqa: E402


@contextmanager
def rollup_off():
    """The records writer with the roll-up's bookkeeping switched off."""
    from compaction_app import rollup

    saved = rollup.apply, rollup.attempt_shares, rollup.compaction_shares
    rollup.apply = lambda *a, **k: None
    rollup.attempt_shares = rollup.compaction_shares = lambda **k: rollup.Shares()
    try:
        yield
    finally:
        rollup.apply, rollup.attempt_shares, rollup.compaction_shares = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compactions", type=int, default=40, help="compactions of each kind")
    parser.add_argument("--items", type=int, default=300)
    args = parser.parse_args()
    run_on_throwaway(run, args, prefix="bench-rollup-")


def run(args) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.turn_setup import history_item
    from compaction_app.models import CompactionPolicy, Provider
    from sessions_app.compactions.services import do_compact_session
    from sessions_app.rollout.services import do_create_session

    provider = Provider.objects.create(name="bench-rollup", base_url=Provider.EMBEDDED, model="sim-1",
                                       context_window=1_000_000)
    policy = CompactionPolicy.objects.create(name="bench-rollup")

    def session():
        return do_create_session(title="rollup", provider=provider, policy=policy,
                                 items=[history_item(i) for i in range(args.items)])

    def compact(s) -> float:
        start = time.perf_counter()
        do_compact_session(session_id=s.pk, strategy="token_budget")
        return (time.perf_counter() - start) * 1000

    on_session, off_session = session(), session()
    compact(on_session)  # warm
    with rollup_off():
        compact(off_session)
    on, off = [], []
    for _ in range(args.compactions):
        on.append(compact(on_session))
        with rollup_off():
            off.append(compact(off_session))
    with CaptureQueriesContext(connection) as with_rollup:
        compact(on_session)
    with rollup_off(), CaptureQueriesContext(connection) as without:
        compact(off_session)
    med_on, med_off = statistics.median(on), statistics.median(off)
    print(f"compaction with the roll-up: {med_on:.1f} ms ({len(with_rollup.captured_queries)} statements); "
          f"without (floor): {med_off:.1f} ms ({len(without.captured_queries)} statements); "
          f"{med_on / med_off:.2f}x on {connection.vendor}, {args.compactions} each, interleaved")


if __name__ == "__main__":
    main()
