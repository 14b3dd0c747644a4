"""Benchmark: the embedded simulated model's cost per request as the history grows, and exact counting speed.

1. Per request: a client (the project's ResponsesClient on the embedded transport, as a turn uses it) sends a
   history of N items, then requests that each add the two items a turn adds (an assistant message and a user
   message), as a session does. Each input is what a turn sends: a `HistorySnapshot` of the growing history. The figure is the median time of those requests; the ratio that matters is
   N = 100k against N = 1k (goal: at most 2x), both measured in this run.
2. Exact counting: `TokenCounter("o200k_base").count_item` on a mix of items against the floor, raw tiktoken
   (`encode_ordinary` of the same model-visible texts), in the same run (goal: at least 0.9x the floor), timed in
   chunks of items alternating which side goes first (the median of the chunks' ratios; the ratio of the total
   times is printed too: it takes every pause of a busy machine on whichever side it fell).

    .venv/bin/python bench/bench_simulated_model.py            # a few seconds; prints figures, floors, ratios
    .venv/bin/python bench/bench_simulated_model.py --quick    # smaller sizes, a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _item(i: int) -> dict:
    kind = i % 4
    if kind == 0:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"step {i}: run it"}]}
    if kind == 1:
        return {"type": "function_call", "call_id": f"c{i}", "name": "shell", "arguments": '{"cmd": "pytest -q"}'}
    if kind == 2:
        return {"type": "function_call_output", "call_id": f"c{i - 1}", "output": f"{i} passed in 0.{i % 97}s"}
    return {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": f"All {i} tests pass; the change to module {i % 13} works."}]}


async def _requests(items: int, requests: int) -> list[float]:
    from compaction_app.engine.history_snapshot import HistorySnapshot
    from compaction_app.engine.port import ResponsesRequest
    from compaction_app.providers.config import ProviderConfig
    from compaction_app.providers.factory import build_client

    config = ProviderConfig(name="bench", base_url="embedded", model="sim-1", context_window=100_000_000)
    client = build_client(config)
    history = [_item(i) for i in range(items)]
    times = []
    try:
        for n in range(requests + 1):
            request = ResponsesRequest(model="sim-1", input=HistorySnapshot(history),
                                       instructions="You are a coding agent.", prompt_cache_key=f"bench-{items}")
            start = time.perf_counter()
            output = []
            async for event in client.stream_response(request):
                if event.type == "response.output_item.done":
                    output.append(event.item)
            elapsed = (time.perf_counter() - start) * 1000
            if n:  # the first request counts the whole history once: it is the warm-up, reported apart
                times.append(elapsed)
            history.extend([*output, {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": f"next step {n}"}]}])
    finally:
        await client.aclose()
    return times


def per_request(sizes: tuple[int, ...], requests: int) -> dict[int, float]:
    medians = {}
    for size in sizes:
        times = asyncio.run(_requests(size, requests))
        medians[size] = statistics.median(times)
        print(f"  request with {size:>7,} items: median {medians[size]:8.2f} ms over {len(times)} requests",
              flush=True)
    return medians


def _session_items(count: int, seed: int) -> list[dict]:
    """Items shaped like a simulated session's: short user and assistant messages, tool calls, and tool outputs of
    several lines of realistic text (test logs, code, diffs, grep hits) from the simulator's text pools."""
    import random

    from sessions_app.simulator.realistic_text import POOL_BUILDERS

    rng = random.Random(seed)
    kinds = sorted(POOL_BUILDERS)
    items = []
    for i in range(count):
        if i % 4 == 0:
            items.append({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": f"Fix the failing test in module {rng.random()}"}]})
        elif i % 4 == 1:
            items.append({"type": "function_call", "call_id": f"c{seed}-{i}", "name": "shell",
                          "arguments": json.dumps({"command": f"pytest -q tests/test_{rng.randrange(10**6)}.py"})})
        elif i % 4 == 2:
            make = POOL_BUILDERS[rng.choice(kinds)]
            items.append({"type": "function_call_output", "call_id": f"c{seed}-{i - 1}",
                          "output": "\n".join(make(rng) for _ in range(rng.randint(2, 12)))})
        else:
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": f"Done: {rng.random()} tests pass now."}]})
    return items


CHUNK = 200  # items per timed chunk: short enough that a busy machine's load does not change within a pair


def counting(rounds: int) -> tuple[float, float, float, float]:
    """(project tokens/s, raw tiktoken tokens/s, tokens per item, the ratio of the total times) on the same items, each counted once by each
    side (no cache can help). The items are timed in chunks, raw tiktoken and the project alternating which goes
    first (ABBA), and the ratio is the median of the chunks' ratios: on a machine whose load changes from one
    second to the next, both sides of a chunk see the same load, and the order's bias cancels."""
    from compaction_app.engine.tokens import TokenCounter, get_encoding, model_visible_text

    encoding = get_encoding("o200k_base")
    counter = TokenCounter("o200k_base")
    ratios, ours_time, raw_time, tokens, items_seen = [], 0.0, 0.0, 0, 0

    def raw_chunk(texts: list[str]) -> tuple[int, float]:
        start = time.perf_counter()
        total = sum(len(encoding.encode_ordinary(t)) for t in texts)
        return total, time.perf_counter() - start

    def our_chunk(items: list[dict]) -> tuple[int, float]:
        start = time.perf_counter()
        total = sum(counter.count_item(i) for i in items)
        return total, time.perf_counter() - start

    for r in range(rounds):
        items = _session_items(4_000, seed=r)
        for k in range(0, len(items), CHUNK):
            chunk = items[k:k + CHUNK]
            texts = [model_visible_text(i) for i in chunk]  # the floor gets its texts for free
            if (k // CHUNK) % 2:
                counted, ours = our_chunk(chunk)
                total, raw = raw_chunk(texts)
            else:
                total, raw = raw_chunk(texts)
                counted, ours = our_chunk(chunk)
            assert counted == total, (counted, total)
            ratios.append(raw / ours)
            ours_time, raw_time, tokens, items_seen = ours_time + ours, raw_time + raw, tokens + total, \
                items_seen + len(chunk)
    ratio = statistics.median(ratios)
    return ratio * tokens / raw_time, tokens / raw_time, tokens / items_seen, raw_time / ours_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", choices=("all", "requests", "counting"), default="all")
    args = parser.parse_args()
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")
    if args.part in ("all", "requests"):
        sizes = (1_000, 10_000) if args.quick else (1_000, 100_000)
        medians = per_request(sizes, requests=5 if args.quick else 15)
        small, large = medians[sizes[0]], medians[sizes[-1]]
        print(f"simulated request: {large:.2f} ms at {sizes[-1]:,} items / {small:.2f} ms at {sizes[0]:,} items "
              f"= {large / small:.2f}x (goal <= 2x)")
    if args.part in ("all", "counting"):
        ours, raw, size, totals = counting(rounds=3 if args.quick else 9)
        print(f"exact counting ({size:.0f} tokens per item): {ours / 1e6:.2f} M tokens/s, raw tiktoken "
              f"{raw / 1e6:.2f} M tokens/s = {ours / raw:.2f}x (goal >= 0.9x; median of {CHUNK}-item chunk pairs; "
              f"ratio of the total times {totals:.2f}x)")


if __name__ == "__main__":
    main()
