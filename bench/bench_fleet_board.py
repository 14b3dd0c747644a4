"""Benchmark: the fleet board with 1,000 sessions (issue 34): its first render and a live update, server time.

Seeds 1,000 sessions (bulk inserts: mixed states, kinds, two providers and policies, tokens spread over the window,
a compaction attempt for every other one), then measures, interleaved round by round so a busy machine slows all
alike (medians):

- **first render**: GET / through Django's test client (middleware, the ranked page of 50, the whole fleet's counts,
  every row's last compaction, the template), default sort (nearest the limit first); and the same filtered (a state
  and a text) and sorted newest first;
- **floor (page query)**: the bare ranked page query alone (`fleet_page`: the 50 sessions, nothing rendered);
- **live update**: what the fleet websocket does in its render pool for one event of a session on the page: the row
  re-rendered from the event's summary, and (compaction) with its summary and last attempt read again;
- **floor (row render)**: the row's partial rendered alone from the summary and its last attempt (the least any row
  update does), and
  **floor (pk read)**: a bare primary-key read of one session (the least a row update touching the database adds);
- **off-page event**: the process's fleet hub handing on an event of a session not on the board's page (the board
  is not called for it; nothing rendered, nothing sent).

    DATABASE_URL=postgres://... .venv/bin/python bench/bench_fleet_board.py    # a throwaway database on that server
    .venv/bin/python bench/bench_fleet_board.py --write                        # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.turn_setup import run_on_throwaway  # noqa: E402

SECTION = "## Fleet board with 1,000 sessions"
STATES = ("running", "running", "running", "idle", "paused", "stopped", "failed")
KINDS = ("native", "native", "gateway", "imported", "followed")


def seed(count: int) -> list[int]:
    import uuid

    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from compaction_app.models import CompactionAttempt, CompactionPolicy, Provider
    from sessions_app.models import Session

    rng = random.Random(34)
    providers = [
        Provider.objects.create(name=f"fleet-{w}", base_url=Provider.EMBEDDED, model="sim-1", context_window=w)
        for w in (128_000, 272_000)
    ]
    policies = [CompactionPolicy.objects.create(name="fleet-default"),
                CompactionPolicy.objects.create(name="fleet-low", auto_compact_token_limit=60_000)]
    sessions = Session.objects.bulk_create([
        Session(title=f"agent {n:04d} · {rng.choice(['fix the parser', 'migrate settings', 'write docs'])}",
                provider=providers[n % 2], policy=policies[n % 3 == 0], state=rng.choice(STATES),
                source=rng.choice(KINDS), thread_id=uuid.uuid4(), model="sim-1",
                meter_usage_total=rng.randrange(0, 120_000), meter_since_model=rng.randrange(0, 3_000),
                last_seq=rng.randrange(10, 5_000), window_number=rng.randrange(1, 9), compaction_count=rng.randrange(8))
        for n in range(count)
    ], batch_size=500)
    now = timezone.now()
    CompactionAttempt.objects.bulk_create([
        CompactionAttempt(session=s, trigger="auto", reason="threshold", implementation="responses",
                          phase="pre_turn", strategy="remote", status="completed", started_at=now,
                          tokens_before=90_000, tokens_after=12_000, duration_ms=900)
        for s in sessions[::2]
    ], batch_size=500)
    operator = User.objects.create_user(username="bench-operator", password="x")
    operator.groups.add(Group.objects.get(name="operator"))
    return [s.pk for s in sessions]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def fleet_consumer(page_rows: list[int]):
    """The fleet websocket's consumer as `start` leaves it (no connection: its render runs here, as in the pool)."""
    from sessions_app.fleet.filter import FleetFilter
    from sessions_app.live import render as live_render
    from sessions_app.live.consumers import FleetConsumer

    consumer = FleetConsumer()
    consumer.serving, consumer.fleet_filter, consumer.page_rows = True, FleetFilter(), set(page_rows)
    consumer.newest_id, consumer.summaries, consumer.attempts, consumer.hub = None, {}, {}, None
    consumer.pending, consumer.stale_attempts, consumer.left_rows, consumer.flusher = set(), set(), set(), None
    consumer.counts_due, consumer.counts_at, consumer.counts_sent, consumer.flushed_at = False, 0.0, None, 0.0
    consumer.rows_waiting = asyncio.Event()
    consumer.names = live_render.names()
    return consumer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    run_on_throwaway(run, args, prefix="bench-fleet-")


def run(args) -> None:
    from django.db import connection
    from django.template.loader import render_to_string
    from django.test import Client

    from sessions_app.fleet.filter import FleetFilter
    from sessions_app.fleet.paging import PAGE_SIZE, FleetPage
    from sessions_app.live import render as live_render
    from sessions_app.live import selectors as ls
    from sessions_app.live.fleet_hub import FleetHub
    from sessions_app.models import Session
    from sessions_app.rollout import selectors
    from sessions_app.rollout.events import lines_event

    ids = seed(args.sessions)
    client = Client(HTTP_HOST="localhost")
    client.force_login(__import__("django.contrib.auth.models", fromlist=["User"]).User.objects.get(
        username="bench-operator"))
    page_ids = [s.pk for s in ls.fleet_page(fleet_filter=FleetFilter(), page=FleetPage())]
    off_page = sorted(set(ids) - set(page_ids))
    consumer = fleet_consumer(page_ids)
    on = Session.objects.select_related("provider", "policy").get(pk=page_ids[len(page_ids) // 2])
    summary = dict(selectors.session_summary(session=on))

    def get(path: str) -> bytes:
        response = client.get(path)
        assert response.status_code == 200, response.status_code
        return response.content

    body = get("/")
    rows = body.count(b'<tr id="session-')
    assert rows == PAGE_SIZE, rows
    filtered_rows = get("/?state=running&q=agent&sort=newest").count(b'<tr id="session-')

    def live_update() -> str:
        live_render.row_cache.clear()  # the first board to render this event's row (the others share it)
        return consumer._render([on.pk], set())

    def live_update_shared() -> str:
        return consumer._render([on.pk], set())  # another board of the process: the row rendered a moment ago

    def live_update_compaction() -> str:
        live_render.row_cache.clear()
        return consumer._render([on.pk], {on.pk})

    update_bytes = len(live_update())

    hub = FleetHub(layer=None)
    hub.register(consumer, open_ended=False)

    async def off_page_events(n: int) -> None:
        for i in range(n):
            hub.dispatch(lines_event(session_id=off_page[i % len(off_page)],
                                     summary={**summary, "id": off_page[i % len(off_page)]},
                                     lines=[(1, "response_item", None)]))
        if consumer.flusher is not None:
            consumer.flusher.cancel()

    measures = {k: [] for k in ("first", "first_filtered", "page_query", "update", "update_shared",
                                "update_compaction", "pk_read", "row_render", "off_page")}
    names = live_render.names()

    def row_render() -> str:  # the partial alone, past the processes' shared row cache
        return render_to_string(f"{live_render.FLEET_PAGE}#fleet_row", {
            "s": summary, "attempt": consumer.attempts.get(on.pk), "names": names, "oob": True})
    for _ in range(3):  # warm the template cache and the connection
        get("/"), live_update()
    for _ in range(args.rounds):
        measures["first"].append(timed(lambda: get("/")))
        measures["first_filtered"].append(timed(lambda: get("/?state=running&q=agent&sort=newest")))
        measures["page_query"].append(timed(lambda: ls.fleet_page(fleet_filter=FleetFilter(), page=FleetPage())))
        consumer.summaries[on.pk] = summary  # as the event carries it
        measures["update"].append(timed(live_update))
        measures["update_shared"].append(timed(live_update_shared))
        measures["update_compaction"].append(timed(live_update_compaction))
        measures["pk_read"].append(timed(lambda: Session.objects.filter(pk=on.pk).values("id", "last_seq").first()))
        measures["row_render"].append(timed(row_render))
        measures["off_page"].append(timed(lambda: asyncio.run(off_page_events(100))) / 100)
    med = {k: statistics.median(v) for k, v in measures.items()}
    backend = connection.vendor
    lines = [
        SECTION, "",
        f"`bench/bench_fleet_board.py` on {backend}, {args.sessions:,} sessions (a compaction attempt for every "
        f"other one), {args.rounds} interleaved rounds, medians, server time (no network, no browser). Goals: first "
        "render < 300 ms, live update < 50 ms.", "",
        "| measure | ms | × floor |",
        "|---|---:|---:|",
        f"| first render, GET / (page of {rows} rows of {args.sessions:,}, counts, last attempts) | "
        f"{med['first']:.1f} | {med['first'] / med['page_query']:.1f}× page query |",
        f"| first render, filtered (state, text) and newest first ({filtered_rows} rows) | "
        f"{med['first_filtered']:.1f} | {med['first_filtered'] / med['page_query']:.1f}× page query |",
        f"| floor: the bare ranked page query | {med['page_query']:.2f} | 1.0× |",
        f"| live update: one row from the event's summary ({update_bytes:,} bytes) | {med['update']:.2f} | "
        f"{med['update'] / med['row_render']:.1f}× row render |",
        f"| the same row for another board of the process (shared rendering) | {med['update_shared']:.2f} | "
        f"{med['update_shared'] / med['row_render']:.2f}× row render |",
        f"| live update after a compaction (summary and last attempt read again) | {med['update_compaction']:.2f} | "
        f"{med['update_compaction'] / (med['row_render'] + med['pk_read']):.1f}× row render + pk read |",
        f"| floor: the row's partial rendered alone | {med['row_render']:.2f} | 1.0× |",
        f"| floor: a bare primary-key read | {med['pk_read']:.2f} | 1.0× |",
        f"| an event of a session off the page, through the process's fleet hub (nothing rendered or sent) | {med['off_page'] * 1000:.1f} µs | |",
        "",
        f"The page's HTML is {len(body):,} bytes; a live update sends one row, never the fleet.",
    ]
    print("\n".join(lines))
    if args.write:
        from bench.doc_section import write_section

        write_section(SECTION, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
