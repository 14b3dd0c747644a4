"""Benchmark: the cost of appending one item (and reading the window total) as the history grows.

The window's active-token total is kept incrementally (spec §3.2), so appending an item and reading the total
should cost the same with 1k, 10k or 100k items in the history. For contrast it also times the O(n) alternative:
summing the stored counts of every live item.

Runs against a throwaway SQLite file (never the dashboard's database, whose rollout cannot be deleted):

    .venv/bin/python bench/bench_window_total.py            # prints the table
    .venv/bin/python bench/bench_window_total.py --write    # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Window total per append"


def _setup_django(tmp: Path) -> None:
    sys.path.insert(0, str(ROOT))
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    os.environ["SQLITE_PATH"] = str(tmp / "bench.sqlite3")
    os.environ["COMPACTWEB_VAR_DIR"] = str(tmp)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _item(i: int) -> dict:
    if i % 3 == 0:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"step {i}: run the tests"}]}
    if i % 3 == 1:
        return {"type": "function_call", "call_id": f"c{i}", "name": "shell", "arguments": '{"cmd": "pytest -q"}'}
    return {"type": "function_call_output", "call_id": f"c{i - 1}", "output": f"{i} passed in 0.{i % 97}s"}


def _grow(session, size: int, batch: int = 5000) -> None:
    from sessions_app.rollout.services import NewLine, append_rollout_lines

    done = 0
    while done < size:
        n = min(batch, size - done)
        append_rollout_lines(session=session, lines=[NewLine("response_item", _item(done + i)) for i in range(n)])
        done += n


def _measure(session, appends: int) -> dict[str, float]:
    from django.db.models import Sum

    from sessions_app.models import LiveItem, Session
    from sessions_app.rollout.services import do_append_items

    append_ms, read_ms, rescan_ms = [], [], []
    item = {"type": "function_call_output", "call_id": "x", "output": "ok"}
    for _ in range(appends):
        t0 = time.perf_counter()
        do_append_items(session=session, items=[item])
        t1 = time.perf_counter()
        total = Session.objects.get(pk=session.pk).tokens_in_window
        t2 = time.perf_counter()
        LiveItem.objects.filter(session=session).aggregate(Sum("tokens"))
        t3 = time.perf_counter()
        append_ms.append((t1 - t0) * 1000)
        read_ms.append((t2 - t1) * 1000)
        rescan_ms.append((t3 - t2) * 1000)
        assert total == session.tokens_in_window
    return {
        "append_median": statistics.median(append_ms),
        "append_p90": statistics.quantiles(append_ms, n=10)[-1],
        "read_median": statistics.median(read_ms),
        "rescan_median": statistics.median(rescan_ms),
    }


def run(sizes: list[int], appends: int) -> list[tuple[int, dict[str, float], float]]:
    from compaction_app.models import CompactionPolicy, Provider
    from sessions_app.rollout.services import do_create_session

    provider = Provider.objects.create(name="bench", base_url="embedded", model="sim-1", context_window=10**9)
    policy = CompactionPolicy.objects.create(name="bench")
    rows = []
    for size in sizes:
        session = do_create_session(title=f"bench {size}", provider=provider, policy=policy)
        t0 = time.perf_counter()
        _grow(session, size)
        setup_s = time.perf_counter() - t0
        rows.append((size, _measure(session, appends), setup_s))
        print(f"{size:>7} items: append {rows[-1][1]['append_median']:.2f} ms (median)", file=sys.stderr)
    return rows


def render(rows, appends: int) -> str:
    lines = [
        SECTION,
        "",
        "What it shows: appending one item to a session and reading its window total (spec §3.2) cost the same",
        "whatever the history length, because every item is counted once on arrival and the total is kept",
        "incrementally. The last column is the O(n) alternative (summing every live item's stored count), for contrast.",
        "",
        f"Measured on {platform.python_implementation()} {platform.python_version()}, {platform.machine()}, SQLite "
        f"(embedded default), {appends} single-item appends per size, median of each.",
        "",
        "| items in history | append one item (ms, median) | append (ms, p90) | read window total (ms) | O(n) rescan (ms) | setup (s) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for size, m, setup_s in rows:
        lines.append(
            f"| {size:,} | {m['append_median']:.2f} | {m['append_p90']:.2f} | {m['read_median']:.2f} | "
            f"{m['rescan_median']:.2f} | {setup_s:.1f} |"
        )
    lines += [
        "",
        "Reproduce: `.venv/bin/python bench/bench_window_total.py --write` (a throwaway SQLite file; takes about a",
        "minute). The history is grown through `append_rollout_lines` in batches of 5,000 items, the same service",
        "path as single appends.",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    path = ROOT / "docs" / "benchmarks.md"
    current = path.read_text() if path.exists() else "# Benchmarks\n\nFigures measured by the scripts under bench/.\n\n"
    if SECTION in current:
        start = current.index(SECTION)
        nxt = current.find("\n## ", start + len(SECTION))
        current = current[:start] + text + (current[nxt + 1 :] if nxt != -1 else "")
    else:
        current = current.rstrip("\n") + "\n\n" + text
    path.parent.mkdir(exist_ok=True)
    path.write_text(current)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--write", action="store_true", help="update the section in docs/benchmarks.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _setup_django(Path(tmp))
        rows = run([int(s) for s in args.sizes.split(",")], args.appends)
    text = render(rows, args.appends)
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
