"""Set-up shared by the turn benchmarks (`bench_turns.py`, `bench_turn_floor.py`, `bench_alert_watch.py`): a throwaway
database, the constant-time model client, and a session whose history is grown to N items before the timed turns.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django(tmp: Path, *, postgres: bool = False) -> str | None:
    """Point Django at a throwaway database and migrate it. SQLite (a file under `tmp`) unless `postgres` and
    DATABASE_URL is set: then a database `<name>_bench_<pid>` is created on that server; its name is returned so
    `drop_throwaway` removes it at the end."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "COMPACTWEB_RUN_SIMULATOR", *(() if postgres else ("DATABASE_URL",))):
        os.environ.pop(name, None)
    throwaway = None
    url = os.environ.get("DATABASE_URL")
    if url:
        import psycopg

        base, _, name = url.rpartition("/")
        throwaway = f"{name.split('?')[0]}_bench_{os.getpid()}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{throwaway}"')
        os.environ["DATABASE_URL"] = f"{base}/{throwaway}"
    os.environ["SQLITE_PATH"] = str(tmp / "bench.sqlite3")
    os.environ["COMPACTWEB_VAR_DIR"] = str(tmp)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    call_command("migrate", verbosity=0)
    return throwaway


def drop_throwaway(throwaway: str | None) -> None:
    if not throwaway:
        return
    import psycopg
    from django.db import connections

    connections.close_all()
    base = os.environ["DATABASE_URL"].rpartition("/")[0]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{throwaway}" WITH (FORCE)')


def run_on_throwaway(run, args, *, prefix: str) -> None:
    """`run(args)` on a throwaway database (PostgreSQL when DATABASE_URL is set, else SQLite) under a temporary
    directory, dropped afterwards whatever happens."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        throwaway = setup_django(Path(tmp), postgres=True)
        try:
            run(args)
        finally:
            drop_throwaway(throwaway)


class ConstantClient:
    """A model that answers every request at once with the same short message (no work per input item)."""

    model = "constant"

    async def stream_response(self, request):
        from compaction_app.engine.port import StreamEvent, Usage

        yield StreamEvent(type="response.created", response_id="r")
        yield StreamEvent(type="response.output_item.done", item={
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]})
        yield StreamEvent(type="response.completed", usage=Usage(input_tokens=1_000, output_tokens=3,
                                                                 total_tokens=1_003))

    async def compact(self, request):  # pragma: no cover
        # The per-turn benchmarks keep their history under the limit: a compaction here would be a benchmark bug.
        raise NotImplementedError("the constant-time benchmark client does not compact (the window is 100M)")


def history_item(i: int) -> dict:
    """The i-th item of a grown history: a user message, a shell call, its output, in turn."""
    if i % 3 == 0:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"step {i}: run it"}]}
    if i % 3 == 1:
        return {"type": "function_call", "call_id": f"c{i}", "name": "shell", "arguments": '{"cmd": "pytest -q"}'}
    return {"type": "function_call_output", "call_id": f"c{i - 1}", "output": f"{i} passed in 0.{i % 97}s"}


def provider_and_policy(*, name: str, window: int):
    from compaction_app.models import CompactionPolicy, Provider

    provider, _ = Provider.objects.get_or_create(
        name=name, defaults={"base_url": Provider.EMBEDDED, "model": "sim-1", "context_window": window,
                             "remote_compaction": Provider.RemoteCompaction.V2},
    )
    policy, _ = CompactionPolicy.objects.get_or_create(name=name)
    return provider, policy


def grown_session(*, items: int, title: str, provider, policy):
    """A new session whose history holds `items` items (see `grow`). Returns (session, seconds spent growing)."""
    from sessions_app.rollout.services import do_create_session

    session = do_create_session(title=title, provider=provider, policy=policy)
    return session, grow(session, items)


def grow(session, items: int) -> float:
    """Append `items` items to `session`, 5,000 at a time without live events (growing it is set-up, not the
    measured work), then leave it as a dashboard that grew turn by turn would have it: SQLite's write-ahead log
    checkpointed, PostgreSQL's table analysed (as autovacuum does). Returns the seconds the appends took."""
    from django.db import connection

    from sessions_app.rollout.services import NewLine, append_rollout_lines

    start = time.perf_counter()
    done = 0
    while done < items:
        n = min(5_000, items - done)
        append_rollout_lines(session=session, lines=[NewLine("response_item", history_item(done + i))
                                                     for i in range(n)], publish=False)
        done += n
    seconds = time.perf_counter() - start
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            cursor.execute("ANALYZE sessions_app_rolloutline")
    return seconds
