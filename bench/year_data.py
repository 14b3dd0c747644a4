"""A year of history in bulk, for the year benchmark and the query-plan test (issue 34): sessions spread over a
year, each with rollout lines, one session with a long history (its live items too), compactions and their
attempts. Rollout lines and live items are written by PostgreSQL itself (INSERT ... SELECT over generate_series: a
million lines in tens of seconds, not hours of appends); sessions, compactions and attempts by bulk inserts. The
rows are shaped like real ones where the hot queries look (kinds, seqs, positions, times), not in their contents.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Year:
    session_ids: list[int]
    long_session: int  # the session with the long history
    compaction_ids: list[int]
    rollup_rebuilt_s: float = 0.0  # the roll-up's backfill from the seeded records


COMPACT_EVERY = 10  # every tenth line of a session is a `compacted` line (a compaction's, when one is seeded there)
LINE_KIND_SQL = (f"CASE WHEN s %% {COMPACT_EVERY} = 0 THEN 'compacted' "
                 "ELSE (ARRAY['response_item','response_item','response_item','event_msg','turn_context'])[1 + s %% 5] END")
ITEM_TOKENS_SQL = f"CASE WHEN s %% {COMPACT_EVERY} = 0 THEN '[]'::jsonb END"  # one count per replacement item
PAYLOAD_SQL = (f"CASE WHEN s %% {COMPACT_EVERY} = 0 THEN "
               "jsonb_build_object('message', 'summary ' || s, 'replacement_history', '[]'::jsonb) "
               "ELSE jsonb_build_object('type', 'message', 'role', 'user', 'n', s) END")


def seed_year(*, sessions: int, lines_per_session: int, long_lines: int, compactions: int, seed: int = 34) -> Year:
    """Write the year (PostgreSQL only: its generate_series). Returns the ids the measures need."""
    from django.db import connection
    from django.utils import timezone

    from compaction_app.models import (
        AttemptRollup,
        Compaction,
        CompactionAttempt,
        CompactionPolicy,
        CompactionRollup,
        LatencyRollup,
        Provider,
    )
    from compaction_app.rollup import rebuild
    from sessions_app.models import LiveItem, RolloutLine, Session

    assert connection.vendor == "postgresql", "the year is written by PostgreSQL's generate_series"
    rng = random.Random(seed)
    provider, _ = Provider.objects.get_or_create(
        name="year", defaults={"base_url": Provider.EMBEDDED, "model": "sim-1", "context_window": 272_000})
    policy, _ = CompactionPolicy.objects.get_or_create(name="year")
    now = timezone.now()
    rows = Session.objects.bulk_create([
        Session(title=f"year session {n}", provider=provider, policy=policy, thread_id=uuid.uuid4(), model="sim-1",
                state=rng.choice(("stopped", "stopped", "idle", "running")), last_seq=lines_per_session)
        for n in range(sessions)
    ], batch_size=2000)
    ids = [s.pk for s in rows]
    long_session, short = ids[-1], ids[:-1]
    with connection.cursor() as cursor:
        # created_at spread over the year (auto_now_add set them all to now); the newest is the long session
        cursor.execute(
            f"UPDATE {Session._meta.db_table} SET created_at = %s - (%s - id) * interval '1 second' * %s "
            "WHERE id BETWEEN %s AND %s",
            [now, ids[-1], 365 * 86400 / max(1, sessions), ids[0], ids[-1]],
        )
        cursor.execute(
            f"""INSERT INTO {RolloutLine._meta.db_table} (session_id, seq, timestamp, kind, payload, tokens,
                                                        item_tokens)
                SELECT sid, s, now() - interval '1 second' * (%s - s), {LINE_KIND_SQL}, {PAYLOAD_SQL}, 40 + s %% 200,
                       {ITEM_TOKENS_SQL}
                FROM unnest(%s::bigint[]) AS sid, generate_series(1, %s) AS s""",
            [lines_per_session, short, lines_per_session],
        )
        cursor.execute(
            f"""INSERT INTO {RolloutLine._meta.db_table} (session_id, seq, timestamp, kind, payload, tokens,
                                                        item_tokens)
                SELECT %s, s, now() - interval '1 second' * (%s - s), {LINE_KIND_SQL}, {PAYLOAD_SQL}, 40 + s %% 200,
                       {ITEM_TOKENS_SQL}
                FROM generate_series(1, %s) AS s""",
            [long_session, long_lines, long_lines],
        )
        cursor.execute(
            f"""INSERT INTO {LiveItem._meta.db_table} (session_id, position, item, tokens, source_seq,
                                                     model_generated)
                SELECT %s, s - 1, jsonb_build_object('type', 'message', 'role', 'user', 'content',
                       jsonb_build_array(jsonb_build_object('type', 'input_text', 'text', 'item ' || s))),
                       40, s, false
                FROM generate_series(1, %s) AS s""",
            [long_session, long_lines],
        )
        cursor.execute(f"UPDATE {Session._meta.db_table} SET last_seq = %s, live_item_count = %s WHERE id = %s",
                       [long_lines, long_lines, long_session])
    assert COMPACT_EVERY * -(-compactions // len(short)) <= lines_per_session, "more compactions than compacted lines"
    made = Compaction.objects.bulk_create([
        Compaction(session_id=short[n % len(short)], rollout_seq=COMPACT_EVERY * (1 + n // len(short)),
                   trigger="auto", reason="threshold", phase="pre_turn", implementation="responses",
                   strategy="remote", tokens_before=90_000, tokens_after=12_000, window_number=2 + n // len(short),
                   window_id=f"w{n}", first_window_id="w0", item_id=f"c{n}", policy=policy, model="sim-1")
        for n in range(compactions)
    ], batch_size=2000)
    attempts = CompactionAttempt.objects.bulk_create([
        CompactionAttempt(session_id=c.session_id, compaction=c, trigger="auto", reason="threshold",
                          implementation="responses", phase="pre_turn", strategy="remote", status="completed",
                          started_at=now, tokens_before=90_000, tokens_after=12_000, duration_ms=rng.randrange(200, 4000),
                          policy=policy, provider=provider)
        for c in made
    ], batch_size=2000)
    with connection.cursor() as cursor:
        # started_at and created_at over the year too, newest last
        for table, column, first, last in (
            (CompactionAttempt._meta.db_table, "started_at", attempts[0].pk, attempts[-1].pk),
            (Compaction._meta.db_table, "created_at", made[0].pk, made[-1].pk),
        ):
            cursor.execute(
                f"UPDATE {table} SET {column} = %s - (%s - id) * interval '1 second' * %s WHERE id BETWEEN %s AND %s",
                [now, last, 365 * 86400 / max(1, compactions), first, last],
            )
        for model in (Session, RolloutLine, LiveItem, Compaction, CompactionAttempt):
            cursor.execute(f"ANALYZE {model._meta.db_table}")
    # The rows were bulk-inserted past the records writer: the analytics roll-up is recounted from them, as the
    # backfill of an existing database is (manage.py rebuild_analytics_rollup).
    started = time.perf_counter()
    rebuild()
    rebuilt_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        for model in (AttemptRollup, LatencyRollup, CompactionRollup):
            cursor.execute(f"ANALYZE {model._meta.db_table}")
    return Year(session_ids=ids, long_session=long_session, compaction_ids=[c.pk for c in made],
                rollup_rebuilt_s=rebuilt_s)
