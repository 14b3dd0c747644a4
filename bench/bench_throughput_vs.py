"""Benchmark: simulated turns per second of this checkout against another checkout of the project (e.g. a git
worktree of the commit before a change), in the same run, alternating, so a busy machine slows both alike.

Each round runs, in a fresh process per checkout, `bench_turns.throughput`: N looping `many-short-turns` sessions
driven by the in-process scheduler with N steps in flight against the embedded simulated model, on a throwaway
SQLite file, after an untimed warm-up of the process (10 sessions, 20 steps). The other checkout must have
`bench/bench_turns.py` with the same `throughput(sessions, steps)`.

    git worktree add --detach ../before <commit>
    .venv/bin/python bench/bench_throughput_vs.py --other ../before              # 100 sessions, 2 rounds
    .venv/bin/python bench/bench_throughput_vs.py --other ../before --sessions 10 --steps 60 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_DRIVER = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, ".")
import asyncio
asyncio.set_event_loop_policy(None)
import bench.bench_turns as b
with tempfile.TemporaryDirectory() as tmp:
    b._setup_django(Path(tmp))
    b.throughput(10, 20)  # warm-up, untimed: loads the tokenizer, the simulator's text pools, the embedded model
    print("RESULT " + json.dumps(b.throughput(int(sys.argv[1]), int(sys.argv[2]))), flush=True)
"""


def run(checkout: Path, sessions: int, steps: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _DRIVER, str(sessions), str(steps)], cwd=checkout,
                          capture_output=True, text=True, timeout=3600)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{checkout}: no result\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--sessions", type=int, default=100)
    # 10 steps per session by default: with 2 (the old default) most steps were a session's first, which loads
    # its history and reads its rollout once, and the figure was mostly start-up.
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    ours, theirs = [], []
    for n in range(args.rounds):
        theirs.append(run(args.other.resolve(), args.sessions, args.steps))
        ours.append(run(ROOT, args.sessions, args.steps))
        print(f"round {n + 1}: other {theirs[-1]['turns_per_s']:.2f} turns/s, this {ours[-1]['turns_per_s']:.2f} "
              f"turns/s (failed turns {theirs[-1]['failed']} / {ours[-1]['failed']}, compactions "
              f"{theirs[-1]['compactions']} / {ours[-1]['compactions']})", flush=True)
    a = statistics.median(r["turns_per_s"] for r in ours)
    b = statistics.median(r["turns_per_s"] for r in theirs)
    print(f"simulated turns/s, {args.sessions} sessions: this {a:.2f}, other {b:.2f} -> {a / b:.2f}x (goal >= 5x)")


if __name__ == "__main__":
    main()
