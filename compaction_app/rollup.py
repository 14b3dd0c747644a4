"""The analytics roll-up's bookkeeping (issue 34): what one attempt or compaction row adds to the roll-up rows
(AttemptRollup, LatencyRollup, CompactionRollup), and applying a change to them with one upsert per table.

compaction_app.records calls it around each write, in the caller's transaction:

    before = attempt_shares(ids=[...]); <the write>; apply(attempt_shares(ids=[...]) - before)

Diffing the rows' shares before and after the write, rather than each transition's own arithmetic, keeps the
roll-up right whatever a write changes (status, start time, duration, the installed compaction, rolled back or
redone, a retention score scored later, re-read tax). `rebuild` recomputes every roll-up row from the records with
the same share functions: the backfill, and the check a test compares against.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.apps import apps as django_apps
from django.db import connection, transaction

ATTEMPT, LATENCY, COMPACTION = "AttemptRollup", "LatencyRollup", "CompactionRollup"
ARCHIVED = "ArchivedRollup"  # archived sessions per day (docs/retention-policy.md, "Analytics")
RUNNING, COMPLETED = "running", "completed"

# What an attempt is counted by in its roll-up row, after its day, policy and provider: its row's key is these.
ATTEMPT_LABELS = ("trigger", "reason", "implementation", "phase", "strategy", "status")

# The fields of a record its share is computed from (the attempt's installed compaction's tokens for `freed`).
ATTEMPT_FIELDS = (
    "started_at",
    "policy_id",
    "provider_id",
    *ATTEMPT_LABELS,
    "duration_ms",
    "compaction_id",
    "compaction__tokens_before",
    "compaction__tokens_after",
)
COMPACTION_FIELDS = (
    "created_at",
    "strategy",
    "policy_id",
    "model",
    "rolled_back",
    "retention_score",
    "tokens_before",
    "tokens_after",
    "call_tokens",
    "probe_tokens",
    "reread_tokens",
    "flagged",
)

# Each roll-up table's key and summed columns (module constants: a migration's historical models carry no class
# attributes).
KEYS = {
    ATTEMPT: ("day", "policy_id", "provider_id", *ATTEMPT_LABELS),
    LATENCY: ("policy_id", "provider_id", "bucket"),
    COMPACTION: ("day", "strategy", "policy_id", "model"),
    ARCHIVED: ("day",),
}
SUMS = {
    ATTEMPT: ("attempts", "installed", "freed", "timed"),
    LATENCY: ("attempts",),
    COMPACTION: ("compactions", "scored", "retention_sum", "freed", "spent", "probes", "reread", "flagged"),
    ARCHIVED: ("sessions",),
}

# A change to the roll-up: (roll-up model name, key, summed field) -> amount.
Shares = Counter


def latency_bucket(duration_ms: int) -> int:
    """The histogram bucket of a duration: its lowest value at two significant digits (0-99 ms exact, then 100,
    110, ..., 990, 1000, 1100, ...): about 90 buckets a decade, so the percentile walk reads a few hundred rows at
    most and picks its exact value inside one bucket."""
    if duration_ms < 100:
        return duration_ms
    step = 10 ** (len(str(duration_ms)) - 2)
    return duration_ms // step * step


def bucket_end(bucket: int) -> int:
    """The highest duration of a bucket (inclusive)."""
    if bucket < 100:
        return bucket
    return bucket + 10 ** (len(str(bucket)) - 2) - 1


def _day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def attempt_share(row: tuple) -> Shares:
    """One attempt's share of the roll-up, from its ATTEMPT_FIELDS."""
    # Unpacked by name, not `*labels`: the starred form costs a list per attempt, and a rebuild reads them all.
    (started_at, policy, provider, trigger, reason, implementation, phase, strategy, status,
     duration, compaction, before, after) = row
    key = (_day(started_at), policy or 0, provider or 0, trigger, reason, implementation, phase, strategy, status)
    share = Shares({(ATTEMPT, key, "attempts"): 1})
    if status == COMPLETED and compaction is not None:
        share[(ATTEMPT, key, "installed")] = 1
        share[(ATTEMPT, key, "freed")] = before - after
    if status != RUNNING and duration is not None:
        share[(ATTEMPT, key, "timed")] = 1
        share[(LATENCY, (policy or 0, provider or 0, latency_bucket(duration)), "attempts")] = 1
    return share


def compaction_share(row: tuple) -> Shares:
    """One compaction's share of the roll-up, from its COMPACTION_FIELDS: nothing while it is rolled back."""
    (
        created_at,
        strategy,
        policy,
        model,
        rolled_back,
        score,
        before,
        after,
        spent,
        probes,
        reread,
        flagged,
    ) = row
    if rolled_back:
        return Shares()
    key = (_day(created_at), strategy, policy or 0, model or "")
    share = Shares(
        {
            (COMPACTION, key, "compactions"): 1,
            (COMPACTION, key, "freed"): before - after,
            (COMPACTION, key, "spent"): spent,
            (COMPACTION, key, "probes"): probes,
            (COMPACTION, key, "reread"): reread,
            (COMPACTION, key, "flagged"): 1 if flagged else 0,
        }
    )
    if score is not None:
        share[(COMPACTION, key, "scored")] = 1
        share[(COMPACTION, key, "retention_sum")] = score
    return share


def _model(name: str, apps=django_apps):
    return apps.get_model("compaction_app", name)


def attempt_shares(*, ids: Iterable[int]) -> Shares:
    """The summed shares of these attempts as the database holds them now."""
    total = Shares()
    for row in _model("CompactionAttempt").objects.filter(pk__in=list(ids)).values_list(*ATTEMPT_FIELDS):
        total.update(attempt_share(row))
    return total


def compaction_shares(*, ids: Iterable[int]) -> Shares:
    """The summed shares of these compactions as the database holds them now."""
    total = Shares()
    for row in _model("Compaction").objects.filter(pk__in=list(ids)).values_list(*COMPACTION_FIELDS):
        total.update(compaction_share(row))
    return total


def change(*, before: Shares, after: Shares) -> Shares:
    """after - before, keeping negative amounts (Counter's `-` drops them)."""
    diff = Shares(after)
    diff.subtract(before)
    return diff


def _rows(shares: Shares, *, drop_zero: bool) -> dict[tuple[str, tuple], dict[str, float]]:
    """Shares grouped by roll-up row: (table, key) -> {summed field: amount}."""
    rows: dict[tuple[str, tuple], dict[str, float]] = {}
    for (name, key, field), amount in shares.items():
        if amount or not drop_zero:
            rows.setdefault((name, key), {})[field] = amount
    return rows


def apply(diff: Shares, *, apps=django_apps) -> None:
    """Add a change to the roll-up rows: one INSERT ... ON CONFLICT DO UPDATE per table (PostgreSQL and SQLite),
    its rows in key order so two transactions lock the rows they share in the same order."""
    tables: dict[str, dict[tuple, dict[str, float]]] = {}
    for (name, key), sums in _rows(diff, drop_zero=True).items():
        tables.setdefault(name, {})[key] = sums
    for name in sorted(tables):
        model = _model(name, apps)
        rows = tables[name]
        quote = connection.ops.quote_name
        table = quote(model._meta.db_table)
        keys = [quote(model._meta.get_field(f).column) for f in KEYS[name]]
        sums = [quote(model._meta.get_field(f).column) for f in SUMS[name]]
        one = "(" + ", ".join(["%s"] * (len(keys) + len(sums))) + ")"
        params: list = []
        for key in sorted(rows):
            params += [*key, *(rows[key].get(f, 0) for f in SUMS[name])]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(keys + sums)}) VALUES {', '.join([one] * len(rows))} "
                f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
                + ", ".join(f"{s} = {table}.{s} + EXCLUDED.{s}" for s in sums),
                params,
            )


# --- archived sessions' shares (docs/retention-policy.md, "Analytics") -------------------------------------------


def _json_key(key: tuple) -> list:
    return [k.isoformat() if isinstance(k, date) else k for k in key]


def _table_key(name: str, key: list) -> tuple:
    return (date.fromisoformat(key[0]), *key[1:]) if name == ATTEMPT else tuple(key)


def _compaction_row(row: tuple) -> list:
    return [row[0].isoformat(), *row[1:]]


def _compaction_figures(row: list) -> tuple:
    return (datetime.fromisoformat(row[0]), *row[1:])


@dataclass(frozen=True)
class SessionShare:
    """A session's share of the roll-up, in the form an ArchivedShare keeps it: its attempts' roll-up amounts
    (JSON), each compaction's rollout seq and COMPACTION_FIELDS (JSON), and its timed attempts' durations as
    (policy, provider, duration) -> how many."""

    attempts: list
    compactions: list
    durations: Counter


def session_share(*, session_id: int, apps=django_apps) -> SessionShare:
    """What the records of one session contribute to the roll-up now (before retention removes them)."""
    attempts = Shares()
    durations: Counter = Counter()
    for row in (
        _model("CompactionAttempt", apps).objects.filter(session_id=session_id).values_list(*ATTEMPT_FIELDS)
    ):
        attempts.update(attempt_share(row))
        status, duration = row[8], row[9]
        if status != RUNNING and duration is not None:
            durations[(row[1] or 0, row[2] or 0, duration)] += 1
    grouped = _rows(attempts, drop_zero=True)
    compactions = [
        [row[0], *_compaction_row(row[1:])]
        for row in _model("Compaction", apps)
        .objects.filter(session_id=session_id)
        .order_by("rollout_seq")
        .values_list("rollout_seq", *COMPACTION_FIELDS)
    ]
    return SessionShare(
        attempts=[[name, _json_key(key), sums] for (name, key), sums in sorted(grouped.items(), key=str)],
        compactions=compactions,
        durations=durations,
    )


def archived_session(*, archived_at: datetime) -> Shares:
    """One more archived session, on its archive's day."""
    return Shares({(ARCHIVED, (_day(archived_at),), "sessions"): 1})


def attempts_part(stored: list) -> Shares:
    """An ArchivedShare's `attempts` as roll-up amounts."""
    total = Shares()
    for name, key, sums in stored:
        for field, amount in sums.items():
            total[(name, _table_key(name, key), field)] += amount
    return total


def compactions_part(stored: list) -> Shares:
    """An ArchivedShare's `compactions` as roll-up amounts."""
    total = Shares()
    for _seq, *figures in stored:
        total.update(compaction_share(_compaction_figures(figures)))
    return total


def stored_figures(stored: list) -> list[tuple[int, dict]]:
    """(rollout seq, {Compaction field: value}) of an ArchivedShare's compactions, the fields a restore writes
    back onto the re-imported rows (the related `compaction__` fields are the attempts')."""
    return [(seq, dict(zip(COMPACTION_FIELDS, _compaction_figures(figures), strict=True))) for seq, *figures in stored]


def rebuild(*, apps=django_apps) -> dict[str, int]:
    """Recompute every roll-up row from the records and the archived sessions' shares (ArchivedShare: the
    backfill; `manage.py rebuild_analytics_rollup`). On
    PostgreSQL the records are locked against writes meanwhile (SHARE: reads go on), so no write falls between the
    recount and the new rows. Returns how many records were counted."""
    attempts, compactions = _model("CompactionAttempt", apps), _model("Compaction", apps)
    try:
        archived = _model("ArchivedShare", apps)
    except LookupError:  # migration 0022's backfill, before the table existed
        archived = None
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                tables = [m._meta.db_table for m in (attempts, compactions, archived) if m is not None]
                cursor.execute(f"LOCK TABLE {', '.join(tables)} IN SHARE MODE")
        tables = (ATTEMPT, LATENCY, COMPACTION, *((ARCHIVED,) if archived is not None else ()))
        for name in tables:
            _model(name, apps).objects.all().delete()
        total, counted = Shares(), {"attempts": 0, "compactions": 0, "archived": 0}
        for row in attempts.objects.order_by().values_list(*ATTEMPT_FIELDS).iterator(chunk_size=5000):
            total.update(attempt_share(row))
            counted["attempts"] += 1
        for row in compactions.objects.order_by().values_list(*COMPACTION_FIELDS).iterator(chunk_size=5000):
            total.update(compaction_share(row))
            counted["compactions"] += 1
        # Archived sessions' shares: their records are gone, "all time" still counts them (retention).
        for stored, stored_compactions, restored, archived_at in (
            archived.objects.order_by().values_list(
                "attempts", "compactions", "restored_at", "archive__archived_at"
            )
            if archived is not None
            else ()
        ):
            total.update(attempts_part(stored))
            total.update(archived_session(archived_at=archived_at))
            if restored is None:
                total.update(compactions_part(stored_compactions))
            counted["archived"] += 1
        rows = _rows(total, drop_zero=False)
        for name in tables:
            model = _model(name, apps)
            model.objects.bulk_create(
                [
                    model(**dict(zip(KEYS[name], key, strict=True)), **sums)
                    for (table, key), sums in rows.items()
                    if table == name
                ],
                batch_size=2000,
            )
    return counted
