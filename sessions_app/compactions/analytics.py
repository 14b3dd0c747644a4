"""The aggregates of the analytics page over compaction attempts (spec §10). Over all time they are read from the
roll-up kept as the attempts are written (sessions_app.compactions.rolled_up, issue 34): O(days x groups) rows,
whatever the history. Over a period they are computed in the database from an index range of the period's attempts:
counts with GROUP BY, sums with aggregates, the latency percentiles by rank (ORDER BY ... OFFSET). `exact=True`
computes all time that way too: the recomputation the roll-up is checked against."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from compaction_app.engine.percentiles import nearest_rank
from compaction_app.engine.vocabulary import STRATEGY_MEMENTO
from compaction_app.models import TOKENS_FREED, Compaction, CompactionAttempt
from sessions_app.compactions import rolled_up

# The analytics dimensions: `method` is compactweb's choice, `strategy` Codex's analytics field (spec §10).
ANALYTICS_DIMENSIONS = ("trigger", "reason", "implementation", "phase", "method", "strategy", "status")
# The column each dimension counts: the stored `strategy` column holds compactweb's method; Codex's `strategy` is
# `memento` for every attempt (§10), so it is counted, not grouped.
_COLUMNS = {"trigger": "trigger", "reason": "reason", "implementation": "implementation", "phase": "phase",
            "method": "strategy", "status": "status"}
PERCENTILES = (50, 90, 99)


def _attempts(*, policy_id: int | None, provider_id: int | None, since: datetime | None) -> QuerySet:
    attempts = CompactionAttempt.objects.all()
    if policy_id is not None:
        attempts = attempts.filter(policy_id=policy_id)
    if provider_id is not None:
        attempts = attempts.filter(provider_id=provider_id)
    if since is not None:
        attempts = attempts.filter(started_at__gte=since)
    return attempts.order_by()  # no model ordering in the GROUP BY


def _totals(attempts: QuerySet, total: int) -> dict[str, dict[str, int]]:
    totals = {
        dimension: dict(attempts.values_list(column).annotate(n=Count("pk")).values_list(column, "n"))
        for dimension, column in _COLUMNS.items()
    }
    totals["strategy"] = {STRATEGY_MEMENTO: total} if total else {}
    return {d: totals[d] for d in ANALYTICS_DIMENSIONS}


def _per_day(attempts: QuerySet) -> dict[str, dict[str, dict[str, int]]]:
    days = attempts.annotate(day=TruncDate("started_at", tzinfo=UTC))
    per_day: dict[str, dict[str, dict[str, int]]] = {}

    def day_of(day) -> dict[str, dict[str, int]]:
        return per_day.setdefault(day.isoformat(), {d: {} for d in ANALYTICS_DIMENSIONS})

    for dimension, column in _COLUMNS.items():
        for day, value, n in days.values_list("day", column).annotate(n=Count("pk")).values_list("day", column, "n"):
            day_of(day)[dimension][value] = n
    for day, n in days.values_list("day").annotate(n=Count("pk")).values_list("day", "n"):
        day_of(day)["strategy"][STRATEGY_MEMENTO] = n
    return dict(sorted(per_day.items()))


def _latency(attempts: QuerySet) -> dict[str, Any]:
    durations = attempts.exclude(status=CompactionAttempt.Status.RUNNING).filter(duration_ms__isnull=False)
    count = durations.count()
    ordered = durations.order_by("duration_ms").values_list("duration_ms", flat=True)
    latency: dict[str, Any] = {
        f"p{q}": float(ordered[rank - 1]) if (rank := nearest_rank(count, q)) else None for q in PERCENTILES
    }
    latency["count"] = count
    return latency


def compaction_analytics(
    *, policy_id: int | None = None, provider_id: int | None = None, since: datetime | None = None,
    exact: bool = False,
) -> dict[str, Any]:
    """Aggregates for the analytics page over attempts (spec §10): counts by trigger, reason, implementation,
    phase and status, per day; window tokens freed (`compactions_freed`: each one's Compaction.tokens_freed, the
    inspector's figure); failure rate; latency percentiles. Policy and provider are the ones each attempt ran
    under."""
    freed, installed = compactions_freed(policy_id=policy_id, provider_id=provider_id, since=since, exact=exact)
    freed_figures = {"tokens_freed": freed, "tokens_freed_mean": (freed / installed) if installed else None}
    if since is None and not exact:
        return {**rolled_up.compaction_analytics(policy_id=policy_id, provider_id=provider_id), **freed_figures}
    attempts = _attempts(policy_id=policy_id, provider_id=provider_id, since=since)
    figures = attempts.aggregate(
        total=Count("pk"),
        finished=Count("pk", filter=~Q(status=CompactionAttempt.Status.RUNNING)),
        failed=Count("pk", filter=Q(status=CompactionAttempt.Status.FAILED)),
    )
    total, finished = figures["total"], figures["finished"]
    return {
        "attempts": total,
        "totals": _totals(attempts, total),
        "per_day": _per_day(attempts),
        **freed_figures,
        "failure_rate": (figures["failed"] / finished) if finished else None,
        "latency_ms": _latency(attempts),
    }


def compactions_freed(*, policy_id: int | None = None, provider_id: int | None = None,
                      since: datetime | None = None, exact: bool = False) -> tuple[int, int]:
    """(window tokens freed, compactions) by the compactions installed and not rolled back, imported ones
    included: the one rule of the analytics page, the same compactions its "Retention and cost" tables sum (a
    rolled-back compaction gave its tokens back). Policy and provider are the ones each was made under (the
    provider: its session's). Over all time from the compaction roll-up, unless a provider is chosen (the
    roll-up does not key by provider: the rows, and the archived sessions' kept shares) or `exact`."""
    if since is None and provider_id is None and not exact:
        return rolled_up.compactions_freed(policy_id=policy_id)
    rows = Compaction.objects.filter(rolled_back=False)
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if policy_id is not None:
        rows = rows.filter(policy_id=policy_id)
    if provider_id is not None:
        rows = rows.filter(session__provider_id=provider_id)
    figures = rows.aggregate(freed=Sum(TOKENS_FREED), compactions=Count("pk"))
    freed, count = int(figures["freed"] or 0), figures["compactions"]
    if since is None and provider_id is not None and not exact:  # all time keeps what archived sessions freed
        archived, archived_count = rolled_up.archived_freed(provider_id=provider_id, policy_id=policy_id)
        freed, count = freed + archived, count + archived_count
    return freed, count
