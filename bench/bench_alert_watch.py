"""Benchmark: the per-turn alert check (issue 18) costs the same whatever the history length.

After a compaction a session's watch is active: every turn reads the watch row, the turn's own items and the
session's meter, and may add re-read tax. This times `record_turn` for a one-turn slice at two history sizes, with
an active watch whose dropped set holds a read of each history file, and reports the ratio (1.0 = flat). SQLite,
a throwaway file:

    .venv/bin/python bench/bench_alert_watch.py
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.bench_turns import _provider_and_policy, _setup_django  # noqa: E402


def item(i: int) -> dict:
    if i % 2 == 0:
        return {"type": "function_call", "call_id": f"c{i}", "name": "read_file",
                "arguments": json.dumps({"path": f"src/m{i % 500}.py"})}
    return {"type": "function_call_output", "call_id": f"c{i - 1}", "output": "x = 1\n" * 20}


def cost(items: int, turns: int = 200, *, active: bool = True) -> float:
    from compaction_app.engine import alerts as rules
    from compaction_app.models import SessionWatch
    from sessions_app.compactions.alerts import record_turn
    from sessions_app.rollout.services import NewLine, append_rollout_lines, do_create_session

    provider, policy = _provider_and_policy()
    session = do_create_session(title=f"watch {items}", provider=provider, policy=policy)
    done = 0
    while done < items:
        n = min(5_000, items - done)
        rows = append_rollout_lines(session=session, lines=[NewLine("response_item", item(done + i)) for i in range(n)])
        done += n
    last = rows[-1].seq
    dropped = {f"read:src/m{k}.py": f"src/m{k}.py" for k in range(500)}
    timings = []
    for _ in range(turns):
        # active: inside the watch windows, with no compaction row to tax (measures the reads and the write);
        # idle: the windows have passed (what every later turn pays until the next compaction)
        watch = rules.Watch(compaction_id=0, dropped=dropped, turns_left=10 ** 6 if active else 0,
                            loop_checked=True, reread_alerted=True)
        SessionWatch.objects.update_or_create(session=session, defaults={"state": watch.to_json()})
        start = time.perf_counter()
        record_turn(session_id=session.pk, first_seq=last - 3, last_seq=last)  # a turn of four items
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _setup_django(Path(tmp))
        rows = [(n, cost(n), cost(n, active=False)) for n in (1_000, 50_000)]
        print("| items in history | active watch (ms, median of 200) | idle watch (ms) |\n|---:|---:|---:|")
        for n, active, idle in rows:
            print(f"| {n:,} | {active:.2f} | {idle:.2f} |")
        print(f"\nratio 50k / 1k, active watch: {rows[1][1] / rows[0][1]:.2f} (1.0 = flat)")


if __name__ == "__main__":
    main()
