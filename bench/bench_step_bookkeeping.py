"""Benchmark: what a simulator step costs beyond its turn (issue 16), at two history lengths, in one run.

A step (`sessions_app.fleet.runtime.arun_step`) takes the session's lease, reads the run and its script position,
checks that the step's turn did not already start (a worker that died mid-step), applies the scenario's events,
builds the tools, runs the turn (`arun_turn`), then saves the position and releases the lease. This script times
the step with the turn replaced by a stub that returns at once (the bookkeeping alone), and beside it the turn
alone (`arun_turn` with a constant-time model client, the same as bench_turn_floor.py), interleaved, on sessions
whose history holds N items (one for the steps, one for the turns); it also counts the bookkeeping's SQL
statements. Goals: bookkeeping at the long
history at most 1.2x the short one (O(1) in history), and a small fraction of the turn.

    .venv/bin/python bench/bench_step_bookkeeping.py                   # SQLite, 1k and 100k items
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/compactweb .venv/bin/python bench/bench_step_bookkeeping.py
    .venv/bin/python bench/bench_step_bookkeeping.py --quick           # 1k and 10k items
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.turn_setup import ConstantClient, drop_throwaway, grow, provider_and_policy, setup_django  # noqa: E402


def _fleet_session(items: int):
    """A looping simulated run (many-short-turns) whose session already holds `items` items, grown without live
    events (set-up, not the measured work)."""
    from sessions_app.fleet import runtime as fleet

    provider, policy = provider_and_policy(name="bench-steps", window=100_000_000)
    run = fleet.do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy, loop=True,
                               seed=1, context_window=100_000_000)[0]
    grow(run.session, items)
    return run.session.pk


def measure(items: int, count: int) -> dict[str, float]:
    from sessions_app.fleet import runtime as fleet
    from sessions_app.models import Session
    from sessions_app.turns.loop import TurnResult
    from sessions_app.turns.services import arun_turn

    # The steps run on one session, the turns alone on another of the same length: as in a running fleet, the
    # newest line of a stepped session is its last turn's (the stub "wrote" it).
    session_id, turn_session_id = _fleet_session(items), _fleet_session(items)
    newest = Session.objects.get(pk=session_id).last_seq
    client = ConstantClient()
    real_turn = fleet.arun_turn
    seq = {"n": 0}

    async def stub_turn(**kwargs) -> TurnResult:
        return TurnResult(turn_id="stub", status="completed", first_seq=newest, last_seq=newest)

    async def step() -> float:
        fleet.arun_turn = stub_turn
        try:
            start = time.perf_counter()
            result = await fleet.arun_step(session_id=session_id)
            elapsed = (time.perf_counter() - start) * 1000
        finally:
            fleet.arun_turn = real_turn
        assert result.status == "ran", result
        return elapsed

    async def turn() -> float:
        seq["n"] += 1
        start = time.perf_counter()
        result = await arun_turn(session_id=turn_session_id, user_input=f"turn {seq['n']}: carry on", client=client)
        assert result.ok, result
        return (time.perf_counter() - start) * 1000

    async def run() -> tuple[list[float], list[float], float]:
        await turn()  # loads the history into the per-process cache
        await step()
        steps, turns = [], []
        for _ in range(count):
            steps.append(await step())
            turns.append(await turn())
        # the statements of one step's bookkeeping, whichever thread runs them
        from django.db.backends import utils

        counted = {"n": 0}
        originals = utils.CursorWrapper.execute, utils.CursorWrapper.executemany

        def counting(original):
            def wrapper(self, *a, **k):
                counted["n"] += 1
                return original(self, *a, **k)
            return wrapper

        utils.CursorWrapper.execute, utils.CursorWrapper.executemany = (counting(o) for o in originals)
        try:
            await step()
        finally:
            utils.CursorWrapper.execute, utils.CursorWrapper.executemany = originals
        queries = [counted["n"]]
        return steps, turns, queries[0]

    steps, turns, queries = asyncio.run(run())
    return {"step": statistics.median(steps), "turn": statistics.median(turns), "queries": queries}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k items, fewer repeats")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per history length")
    args = parser.parse_args()
    sizes = (1_000, 10_000) if args.quick else (1_000, 100_000)
    count = args.steps or (20 if args.quick else 40)
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp:
        throwaway = setup_django(Path(tmp), postgres=True)
        try:
            from django.db import connection

            print(f"database: {connection.vendor}; median of {count} steps per history length")
            figures = {n: measure(n, count) for n in sizes}
        finally:
            drop_throwaway(throwaway)
    small, large = sizes
    for n in sizes:
        f = figures[n]
        print(f"{n:>7,} items: step bookkeeping {f['step']:6.2f} ms ({f['queries']} SQL statements), "
              f"turn alone {f['turn']:6.2f} ms, bookkeeping / turn {f['step'] / f['turn']:.2f}")
    print(f"bookkeeping at {large:,} / at {small:,} items: {figures[large]['step'] / figures[small]['step']:.2f}x "
          f"(goal <= 1.2x)")


if __name__ == "__main__":
    main()
