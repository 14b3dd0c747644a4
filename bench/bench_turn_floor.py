"""Benchmark: a turn and an append against their floors, measured side by side in one run.

1. A turn with a constant-time model client (no work per input item; one assistant message and its usage) through
   `arun_turn`, on a session whose history holds 1k and 100k items. The turn writes 6 rollout lines (turn_started,
   turn_context, the user message, the answer, its usage, turn_complete) and tokenizes its 2 new items. Floors: the
   same 6 rows inserted in one transaction with the ORM's bulk_create, plus counting the 2 items (the ORM floor),
   and the same with one raw executemany (the raw floor). Goals: turn <= 4x the ORM floor; turn at 100k <= 1.2x
   the turn at 1k.
2. Appending one item through `append_rollout_lines` (validate, count, lock the header, insert the line and its
   live item, update the header) against one raw INSERT transaction of a rollout row. Goal: <= 3x.

The figures are medians; the floors are measured in the same process, interleaved with the project's runs, so a
busy machine slows both. SQLite by default (a throwaway file); with DATABASE_URL (PostgreSQL) a throwaway database
`<name>_bench_<pid>` is created on that server and dropped at the end.

    .venv/bin/python bench/bench_turn_floor.py                 # SQLite, about 15 s on an idle 2-core machine
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/compactweb .venv/bin/python bench/bench_turn_floor.py
    .venv/bin/python bench/bench_turn_floor.py --quick         # 1k and 5k items, a smoke run
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
from bench.turn_setup import ConstantClient, drop_throwaway, grown_session, provider_and_policy, setup_django  # noqa: E402


def _session(items: int, title: str):
    provider, policy = provider_and_policy(name="bench-floor", window=100_000_000)
    return grown_session(items=items, title=title, provider=provider, policy=policy)[0]


class Floors:
    """The minimal work of a turn and of an append, on a session of their own."""

    def __init__(self) -> None:
        from compaction_app.engine.tokens import counter

        self.session = _session(0, "floor")
        self.seq = 10_000
        self.counter = counter("o200k_base")
        self.user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "turn: carry on"}]}
        self.answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}

    def _rows(self) -> list[tuple[str, dict]]:
        return [("event_msg", {"type": "turn_started"}), ("turn_context", {"model": "sim-1"}),
                ("response_item", self.user), ("response_item", self.answer),
                ("event_msg", {"type": "token_count"}), ("event_msg", {"type": "turn_complete"})]

    def orm_turn(self) -> float:
        from django.db import transaction
        from django.utils import timezone

        from sessions_app.models import RolloutLine

        start = time.perf_counter()
        tokens = [self.counter.count_item(self.user), self.counter.count_item(self.answer)]
        now = timezone.now()
        rows = []
        for kind, payload in self._rows():
            self.seq += 1
            rows.append(RolloutLine(session=self.session, seq=self.seq, timestamp=now, kind=kind, payload=payload,
                                    tokens=tokens[0] if payload is self.user else 0))
        with transaction.atomic():
            RolloutLine.objects.bulk_create(rows)
        return (time.perf_counter() - start) * 1000

    def raw_turn(self) -> float:
        from django.db import connection, transaction
        from django.utils import timezone

        start = time.perf_counter()
        tokens = [self.counter.count_item(self.user), self.counter.count_item(self.answer)]
        now = timezone.now()
        values = []
        for kind, payload in self._rows():
            self.seq += 1
            values.append((self.session.pk, self.seq, now, kind, _json(payload), tokens[0]))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(_INSERT, values)
        return (time.perf_counter() - start) * 1000

    def raw_insert(self) -> float:
        from django.db import connection, transaction
        from django.utils import timezone

        start = time.perf_counter()
        self.seq += 1
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_INSERT, (self.session.pk, self.seq, timezone.now(), "response_item", _json(self.user), 5))
        return (time.perf_counter() - start) * 1000


_INSERT = ("INSERT INTO sessions_app_rolloutline (session_id, seq, timestamp, kind, payload, tokens) "
           "VALUES (%s, %s, %s, %s, %s, %s)")


def _json(payload: dict) -> str:
    import json

    return json.dumps(payload)


def turns(items: int, count: int, floors: Floors) -> dict[str, float]:
    from asgiref.sync import async_to_sync, sync_to_async

    from sessions_app.turns.services import arun_turn

    session = _session(items, f"bench {items}")
    client = ConstantClient()

    async def one(n: int) -> float:
        start = time.perf_counter()
        result = await arun_turn(session_id=session.pk, user_input=f"turn {n}: carry on", client=client)
        assert result.ok, result
        return (time.perf_counter() - start) * 1000

    async def hop() -> float:
        start = time.perf_counter()
        await sync_to_async(_nothing)()
        return (time.perf_counter() - start) * 1000

    async def run() -> tuple[float, list[float], list[float], list[float], list[float]]:
        # One event loop for all turns, as in a server; each floor times itself in the database thread.
        first = await one(0)  # loads the history into the per-process cache: reported apart
        ours, orm, raw, hops = [], [], [], []
        for n in range(1, count + 1):
            ours.append(await one(n))
            orm.append(await sync_to_async(floors.orm_turn)())
            raw.append(await sync_to_async(floors.raw_turn)())
            hops.append(await hop())
        return first, ours, orm, raw, hops

    first, ours, orm, raw, hops = async_to_sync(run)()
    return {"items": items, "first_ms": first, "turn_ms": statistics.median(ours),
            "orm_ms": statistics.median(orm), "raw_ms": statistics.median(raw), "hop_ms": statistics.median(hops)}


def _nothing() -> None:
    """An empty trip from the event loop to Django's database thread and back: what each of a turn's three trips
    (lease and session, the turn's first write, its last write) costs beyond its work. The floors make none."""


def appends(count: int, floors: Floors) -> dict[str, float]:
    from sessions_app.rollout.services import NewLine, append_rollout_lines

    session = _session(1_000, "bench append")
    item = {"type": "function_call_output", "call_id": "x", "output": "ok"}
    ours, raw = [], []
    for _ in range(count):
        start = time.perf_counter()
        append_rollout_lines(session=session, lines=[NewLine("response_item", item)])
        ours.append((time.perf_counter() - start) * 1000)
        raw.append(floors.raw_insert())
    return {"append_ms": statistics.median(ours), "raw_ms": statistics.median(raw)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        throwaway = setup_django(Path(tmp), postgres=True)
        try:
            from django.db import connection

            vendor = connection.vendor
            floors = Floors()
            sizes = (1_000, 5_000) if args.quick else (1_000, 100_000)
            rows = [turns(items, 20 if args.quick else args.turns, floors) for items in sizes]
            append = appends(100 if args.quick else 300, floors)
        finally:
            drop_throwaway(throwaway)
    print(f"database: {vendor}")
    for r in rows:
        print(f"turn at {r['items']:>7,} items: {r['turn_ms']:6.2f} ms (first {r['first_ms']:.1f} ms) | ORM floor "
              f"{r['orm_ms']:.2f} ms -> {r['turn_ms'] / r['orm_ms']:.2f}x (goal <= 4x) | raw floor {r['raw_ms']:.2f} ms "
              f"-> {r['turn_ms'] / r['raw_ms']:.1f}x | one empty trip to the database thread {r['hop_ms']:.2f} ms")
    print(f"turn at {sizes[-1]:,} / at {sizes[0]:,} items: {rows[-1]['turn_ms'] / rows[0]['turn_ms']:.2f}x "
          f"(goal <= 1.2x)")
    print(f"append one item: {append['append_ms']:.2f} ms | raw INSERT transaction {append['raw_ms']:.2f} ms -> "
          f"{append['append_ms'] / append['raw_ms']:.2f}x (goal <= 3x)")


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
