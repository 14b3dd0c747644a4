"""Engine overhead: everything run_compaction does except the model call, for 10k / 100k / 1M-token histories.

The fake client answers instantly, so the time measured is the engine's own work (normalising, trimming, building
and filtering the replacement history, counting the new history, events, analytics). Run:

    .venv/bin/python bench/bench_engine.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compaction_app.engine.compactor import CompactionRequest, HistorySnapshot, run_compaction  # noqa: E402
from compaction_app.engine.port import CompactResponse, StreamEvent, Usage  # noqa: E402
from compaction_app.engine.settings import CompactionSettings  # noqa: E402
from compaction_app.engine.tokens import counter  # noqa: E402
from compaction_app.engine.windows import WindowState  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)
STRATEGIES = {
    "local": dict(),
    "remote_v1": dict(remote_compaction="v1"),
    "remote_v2": dict(remote_compaction="v2", remote_compaction_v2=True),
}
WORDS = "the quick brown fox jumps over the lazy dog while compiling a very long build log line".split()


def text(n_words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n_words))


def make_history(target_tokens: int, count) -> tuple[list[dict], list[int]]:
    """A realistic turn mix: user message, assistant reply, tool call + output, repeated."""
    items: list[dict] = []
    tokens: list[int] = []
    total = 0
    i = 0
    while total < target_tokens:
        turn = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text(30, i)}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text(60, i)}]},
            {"type": "function_call", "call_id": f"c{i}", "name": "shell", "arguments": '{"cmd": "make"}'},
            {"type": "function_call_output", "call_id": f"c{i}", "output": text(200, i)},
        ]
        for item in turn:
            n = count(item)
            items.append(item)
            tokens.append(n)
            total += n
        i += 1
    return items, tokens


class InstantClient:
    model = "bench"

    def stream_response(self, request):
        last = request.input[-1] if request.input else {}
        return self._events(last.get("type") == "compaction_trigger")

    async def _events(self, v2: bool):
        if v2:
            yield StreamEvent(type="response.output_item.done", item={"type": "compaction", "encrypted_content": "E"})
        else:
            yield StreamEvent(type="response.output_item.done", item={
                "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "summary"}]})
        yield StreamEvent(type="response.completed", usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2))

    async def compact(self, request):
        return CompactResponse(output=[{"type": "compaction", "encrypted_content": "E"}])


async def once(items, tokens, settings) -> float:
    snapshot = HistorySnapshot(items=items, item_tokens=tokens, active_tokens=sum(tokens),
                               window=WindowState.start(), turn_id="t")
    start = time.perf_counter()
    outcome = await run_compaction(snapshot=snapshot, settings=settings,
                                   request=CompactionRequest(trigger="auto", phase="pre_turn"),
                                   client=InstantClient(), emit=lambda e: None)
    elapsed = time.perf_counter() - start
    assert outcome.ok, outcome.error
    return elapsed


def main() -> None:
    token_counter = counter("o200k_base")
    rows = []
    for size in SIZES:
        items, tokens = make_history(size, token_counter.count_item)
        for name, overrides in STRATEGIES.items():
            # A window large enough that no output trimming happens: the common path.
            settings = CompactionSettings(model="bench", context_window=4_000_000, token_counter="o200k_base",
                                          **overrides)
            runs = 3 if size >= 1_000_000 else 7
            times = [asyncio.run(once(items, tokens, settings)) for _ in range(runs)]
            median = statistics.median(times)
            rows.append((name, sum(tokens), len(items), median))
    print(f"{'strategy':<10} {'tokens':>10} {'items':>7} {'median ms':>10} {'µs / 1k tokens':>15}")
    for name, n_tokens, n_items, median in rows:
        print(f"{name:<10} {n_tokens:>10} {n_items:>7} {median * 1000:>10.2f} {median * 1e6 / (n_tokens / 1000):>15.1f}")


if __name__ == "__main__":
    main()
