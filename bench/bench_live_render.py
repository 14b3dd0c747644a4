"""Benchmark: the CPU a web process spends rendering one turn's live batch for a session with a long history.

A watcher of the session page receives, for every turn, the lines the turn appended (turn_started, the user message,
the answer, its token_count usage line, turn_complete) as one batch rendered by `session_batch`, the way the
consumer asks for it: `after_seq` the page's seq, `upto_seq` and `summary` what the event carries, the batch cache
never hitting (each batch has a key of its own). The usage line re-renders the token chart, whose CHART_POINTS
readings are full on a session of 1,200 turns (with a compaction every 300 turns, so the chart has drops).

Measured, interleaved turn by turn so a busy machine slows all alike (medians):
- batch: `session_batch` as a live page sees it, turn after turn (the process renders every batch);
- batch, chart cold: the same with the process's chart state forgotten first (the first batch after a start, a
  restart, or a page that fell behind), when the code has such state (else it equals `batch`);
- floor: the minimal work of a batch, reading its lines by seq range and rendering the appended-history partial.
`--profile` prints where `batch` spends its time (cProfile). SQLite, a throwaway file:

    .venv/bin/python bench/bench_live_render.py             # about 30 s on an idle 2-core machine
    .venv/bin/python bench/bench_live_render.py --quick     # 400 turns, 20 batches: a smoke run
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.turn_setup import provider_and_policy, setup_django  # noqa: E402

COMPACT_EVERY = 300  # turns between two compactions while the history is grown


def turn_lines(n: int) -> list:
    """The lines one simulated turn appends: its start, a user message, the answer, the usage, its end."""
    from sessions_app.rollout.services import NewLine, usage_line

    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"turn {n}: carry on"}]}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Done {n}."}]}
    return [
        NewLine("event_msg", {"type": "turn_started", "turn_id": f"t{n}", "model_context_window": 200_000}),
        NewLine("response_item", user),
        NewLine("response_item", answer),
        usage_line(usage={"input_tokens": 20_000 + 150 * (n % COMPACT_EVERY), "output_tokens": 40}),
        NewLine("event_msg", {"type": "turn_complete", "turn_id": f"t{n}", "status": "completed",
                              "last_agent_message": f"Done {n}."}),
    ]


def long_session(turns: int):
    """A session with `turns` turns (each with a usage line) and a local compaction every COMPACT_EVERY turns."""
    from sessions_app.compactions.services import do_compact_session
    from sessions_app.rollout.services import append_rollout_lines, do_create_session

    provider, policy = provider_and_policy(name="bench-live-render", window=200_000)
    session = do_create_session(title="bench live render", provider=provider, policy=policy)
    for n in range(turns):
        append_rollout_lines(session=session, lines=turn_lines(n), publish=False)
        if n % COMPACT_EVERY == COMPACT_EVERY - 1:
            do_compact_session(session_id=session.pk, strategy="local")
            session.refresh_from_db()
    return session


def append_turn(session, n: int) -> tuple[int, dict]:
    """Append one turn without a live event; returns the seq before it and the summary its event would carry."""
    from sessions_app.rollout import selectors
    from sessions_app.rollout.services import append_rollout_lines

    before = session.last_seq
    append_rollout_lines(session=session, lines=turn_lines(n), publish=False)
    return before, selectors.session_summary(session=session)


def batch(session, before: int, summary: dict) -> float:
    from sessions_app.live import render

    start = time.perf_counter()
    html, upto = render.session_batch(session_id=session.pk, after_seq=before, upto_seq=summary["last_seq"],
                                      summary=summary)
    ms = (time.perf_counter() - start) * 1000
    assert html and upto == summary["last_seq"], (upto, summary["last_seq"])
    return ms


def forget_chart_state() -> None:
    from sessions_app.live import render

    cache = getattr(render, "chart_cache", None)
    if cache is not None:
        cache.clear()


def floor(session, before: int, upto: int, summary: dict) -> float:
    """Read the batch's lines by seq range and render the appended-history partial only."""
    from sessions_app.live import render
    from sessions_app.live import selectors as ls
    from sessions_app.rollout import projection as p
    from sessions_app.rollout import selectors as rollout_selectors

    start = time.perf_counter()
    lines = rollout_selectors.lines_between(session_id=session.pk, after_seq=before, upto_seq=upto)
    entries = [ls.HistoryEntry(item=ln.payload, tokens=ln.tokens, seq=ln.seq, position=-1)
               for ln in lines if ln.kind == p.RESPONSE_ITEM]
    html = render._partial(render.SESSION_PAGE, "history_append",
                           {"s": summary, "seq": upto, "oob": True, "entries": entries})
    ms = (time.perf_counter() - start) * 1000
    assert html
    return ms


def measure(session, count: int, first_turn: int) -> dict[str, float]:
    ours, cold, floors = [], [], []
    n = first_turn
    for _ in range(count):
        before, summary = append_turn(session, n)
        n += 1
        ours.append(batch(session, before, summary))
        floors.append(floor(session, before, summary["last_seq"], summary))
        before, summary = append_turn(session, n)
        n += 1
        forget_chart_state()
        cold.append(batch(session, before, summary))
        floors.append(floor(session, before, summary["last_seq"], summary))
        # the next warm batch follows a cold one: render one more turn so the warm figure is a steady state
        before, summary = append_turn(session, n)
        n += 1
        batch(session, before, summary)
    return {"batch_ms": statistics.median(ours), "cold_ms": statistics.median(cold),
            "floor_ms": statistics.median(floors), "next_turn": n}


def profile(session, count: int, first_turn: int) -> str:
    profiler = cProfile.Profile()
    n = first_turn
    for _ in range(count):
        before, summary = append_turn(session, n)
        n += 1
        profiler.enable()
        batch(session, before, summary)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(20)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 turns of history, 20 batches: a smoke run")
    parser.add_argument("--turns", type=int, default=1_200, help="turns of history before the timed batches")
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the batches")
    args = parser.parse_args()
    turns, count = (400, 20) if args.quick else (args.turns, args.batches)
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp))
        from sessions_app.live.selectors import CHART_POINTS, token_points

        session = long_session(turns)
        points = len(token_points(session=session))
        # warm up: templates compiled, statements built, the chart state (if any) filled
        for n in range(turns, turns + 3):
            before, summary = append_turn(session, n)
            batch(session, before, summary)
            floor(session, before, summary["last_seq"], summary)
        figures = measure(session, count, turns + 3)
        report = profile(session, count, figures["next_turn"]) if args.profile else ""
    print(f"database: sqlite | history: {turns:,} turns, seq {session.last_seq:,}, {points} chart points "
          f"(CHART_POINTS {CHART_POINTS}) | {count} batches of one turn (5 lines)")
    f = figures
    print(f"batch:             {f['batch_ms']:6.2f} ms | floor {f['floor_ms']:.2f} ms -> "
          f"{f['batch_ms'] / f['floor_ms']:.1f}x")
    print(f"batch, chart cold: {f['cold_ms']:6.2f} ms | floor {f['floor_ms']:.2f} ms -> "
          f"{f['cold_ms'] / f['floor_ms']:.1f}x")
    if report:
        print(report)


if __name__ == "__main__":
    main()
