"""What-if replay of the scenario library with every compaction method (issue 18).

Each scenario is replayed turn by turn against the embedded simulated model (no Django, no network) once per
method, with the same seed, window and number of turns (sessions_app/simulator/whatif.py), and the figures are
compared: compactions (and failed attempts), tokens spent on model calls (turns + compaction calls + probes), the
peak window, and the mean retention score of the compactions (structural check, and the model-judged check whose
probes the simulated model answers extractively).

    .venv/bin/python bench/bench_whatif.py            # prints the table (about two minutes)
    .venv/bin/python bench/bench_whatif.py --write    # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECTION = "## What-if replay: compaction methods compared"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{round(value * 100)}%"


def table(window: int, turns: int, seed: int) -> str:
    from sessions_app.simulator import list_scenarios
    from sessions_app.simulator.whatif import METHODS, replay_all

    started = time.perf_counter()
    results = replay_all(list_scenarios(), METHODS, context_window=window, turns=turns, seed=seed, probes=True)
    elapsed = time.perf_counter() - started
    lines = [
        "| scenario | method | compactions (failed) | tokens spent | of which compaction | peak window | "
        "retention (structural) | retention (model-judged) | failed turns |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.scenario} | {r.method} | {r.compactions} ({r.failures}) | {r.tokens_spent:,} | "
            f"{r.compaction_tokens:,} | {r.peak_tokens:,} | {pct(r.retention)} | {pct(r.probe_retention)} | "
            f"{r.turn_errors} |"
        )
    totals: dict[str, list] = {}
    for r in results:
        totals.setdefault(r.method, []).append(r)
    lines += ["", "Totals over the library:", "",
              "| method | compactions | tokens spent | vs local | mean retention (structural) | "
              "mean retention (model-judged) |", "|---|---:|---:|---:|---:|---:|"]
    local = sum(r.tokens_spent for r in totals.get("local summary", [])) or 1
    for method, rows in totals.items():
        spent = sum(r.tokens_spent for r in rows)
        scores = [s for r in rows for s in r.scores]
        probes = [s for r in rows for s in r.probe_scores]
        lines.append(
            f"| {method} | {sum(r.compactions for r in rows)} | {spent:,} | {spent / local:.2f}× | "
            f"{pct(sum(scores) / len(scores) if scores else None)} | "
            f"{pct(sum(probes) / len(probes) if probes else None)} |"
        )
    lines += ["", f"Window {window:,} tokens, {turns} turns per scenario (looping scripts), seed {seed}; "
              f"{len(results)} replays in {elapsed:.0f} s on one core."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--turns", type=int, default=18)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args()
    text = table(args.window, args.turns, args.seed)
    print(text)
    if args.write:
        doc = ROOT / "docs" / "benchmarks.md"
        body = doc.read_text()
        marker = "<!-- whatif-table -->"
        start, end = body.index(marker), body.rindex(marker)
        doc.write_text(body[: start + len(marker)] + "\n" + text + "\n" + body[end:])


if __name__ == "__main__":
    main()
