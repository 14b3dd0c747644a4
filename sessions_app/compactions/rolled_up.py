"""The analytics page's all-time figures read from the roll-up kept as the records are written (issue 34;
compaction_app.rollup keeps it): the same answers as sessions_app.compactions.analytics and .retention compute from
the records, in O(days x groups) rows however many attempts and compactions a year holds.

The latency percentiles are exact: the histogram (LatencyRollup) finds the bucket that holds each nearest rank, and
one index range read of that bucket's timed attempts (attempt_timed_duration) picks the value at its offset in it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db.models import Count, Sum

from compaction_app.engine.percentiles import nearest_rank
from compaction_app.engine.vocabulary import STRATEGY_MEMENTO
from compaction_app.models import (
    ArchivedDuration,
    ArchivedRollup,
    ArchivedShare,
    AttemptRollup,
    CompactionAttempt,
    CompactionPolicy,
    CompactionRollup,
    LatencyRollup,
)
from compaction_app.rollup import ATTEMPT_LABELS, bucket_end, compactions_part

DIMENSIONS = ("trigger", "reason", "implementation", "phase", "method", "strategy", "status")
PERCENTILES = (50, 90, 99)
_RUNNING, _FAILED = CompactionAttempt.Status.RUNNING, CompactionAttempt.Status.FAILED


def _scoped(rows, *, policy_id: int | None, provider_id: int | None):
    if policy_id is not None:
        rows = rows.filter(policy_id=policy_id)
    if provider_id is not None:
        rows = rows.filter(provider_id=provider_id)
    return rows


def _pick(timed, archived, *, low: int, high: int, offset: int) -> float | None:
    """The duration at `offset` (0-based, in order) among the live timed attempts and the archived sessions'
    (ArchivedDuration) in one bucket. Without archived durations in it: one index range read at the offset; with
    them: the bucket's live durations counted per value and merged with the archived counts."""
    in_bucket = {"duration_ms__gte": low, "duration_ms__lte": high}
    stored = dict(
        archived.filter(**in_bucket)
        .values_list("duration_ms")
        .annotate(n=Sum("attempts"))
        .values_list("duration_ms", "n")
        .order_by()
    )
    if not stored:
        picked = list(
            timed.filter(**in_bucket)
            .order_by("duration_ms")
            .values_list("duration_ms", flat=True)[offset : offset + 1]
        )
        return float(picked[0]) if picked else None  # (a roll-up out of step: rebuild_analytics_rollup)
    counts = Counter(stored)
    counts.update(
        dict(
            timed.filter(**in_bucket)
            .values_list("duration_ms")
            .annotate(n=Count("pk"))
            .values_list("duration_ms", "n")
            .order_by()
        )
    )
    for duration in sorted(counts):
        if offset < counts[duration]:
            return float(duration)
        offset -= counts[duration]
    return None  # (a roll-up out of step: rebuild_analytics_rollup)


def archived_sessions() -> int:
    """How many archived sessions' shares the all-time figures include (ArchivedShare: the attempts of every
    archived session, the compactions of those not restored), from their per-day counts (ArchivedRollup)."""
    return ArchivedRollup.objects.aggregate(n=Sum("sessions"))["n"] or 0


def _latency(*, policy_id: int | None, provider_id: int | None) -> dict[str, Any]:
    histogram = list(
        _scoped(LatencyRollup.objects.filter(attempts__gt=0), policy_id=policy_id, provider_id=provider_id)
        .values_list("bucket")
        .annotate(n=Sum("attempts"))
        .values_list("bucket", "n")
        .order_by("bucket")
    )
    count = sum(n for _, n in histogram)
    timed = _scoped(
        CompactionAttempt.objects.filter(duration_ms__isnull=False).exclude(status=_RUNNING),
        policy_id=policy_id,
        provider_id=provider_id,
    )
    archived = _scoped(ArchivedDuration.objects.all(), policy_id=policy_id, provider_id=provider_id)
    latency: dict[str, Any] = {}
    for q in PERCENTILES:
        rank, value, below = nearest_rank(count, q), None, 0
        for bucket, n in histogram if rank else ():
            if below + n >= rank:
                value = _pick(timed, archived, low=bucket, high=bucket_end(bucket), offset=rank - below - 1)
                break
            below += n
        latency[f"p{q}"] = value
    latency["count"] = count
    return latency


def compaction_analytics(*, policy_id: int | None = None, provider_id: int | None = None) -> dict[str, Any]:
    """sessions_app.compactions.analytics.compaction_analytics over all time, from the roll-up (the attempts'
    figures; what was freed is `compactions_freed`'s)."""
    rows = _scoped(AttemptRollup.objects.filter(attempts__gt=0), policy_id=policy_id, provider_id=provider_id)
    totals: dict[str, dict[str, int]] = {d: {} for d in DIMENSIONS}
    per_day: dict[str, dict[str, dict[str, int]]] = {}
    total = finished = failed = 0
    for day, trigger, reason, implementation, phase, method, status, n in rows.values_list(
        "day", *ATTEMPT_LABELS, "attempts",
    ).order_by():
        values = {
            "trigger": trigger,
            "reason": reason,
            "implementation": implementation,
            "phase": phase,
            "method": method,
            "strategy": STRATEGY_MEMENTO,
            "status": status,
        }
        of_day = per_day.setdefault(day.isoformat(), {d: {} for d in DIMENSIONS})
        for dimension, value in values.items():
            totals[dimension][value] = totals[dimension].get(value, 0) + n
            of_day[dimension][value] = of_day[dimension].get(value, 0) + n
        total += n
        finished += 0 if status == _RUNNING else n
        failed += n if status == _FAILED else 0
    return {
        "attempts": total,
        "totals": totals,
        "per_day": dict(sorted(per_day.items())),
        "failure_rate": (failed / finished) if finished else None,
        "latency_ms": _latency(policy_id=policy_id, provider_id=provider_id),
    }


def compactions_freed(*, policy_id: int | None = None) -> tuple[int, int]:
    """sessions_app.compactions.analytics.compactions_freed over all time, from the compaction roll-up (the rows
    `retention_rollup` sums, archived sessions' included)."""
    rows = CompactionRollup.objects.all()
    if policy_id is not None:
        rows = rows.filter(policy_id=policy_id)
    figures = rows.aggregate(freed=Sum("freed"), compactions=Sum("compactions"))
    return int(figures["freed"] or 0), int(figures["compactions"] or 0)


def archived_freed(*, provider_id: int, policy_id: int | None = None) -> tuple[int, int]:
    """(window tokens freed, compactions) of the not restored archived sessions of one provider (and policy), from
    their kept shares: what all time adds to the live rows when a provider is chosen (the compaction roll-up does
    not key by provider)."""
    freed = count = 0
    for stored in (ArchivedShare.objects.filter(archive__provider_id=provider_id, restored_at__isnull=True)
                   .values_list("compactions", flat=True)):
        for (_table, key, field), amount in compactions_part(stored).items():
            if policy_id is not None and key[2] != policy_id:
                continue
            freed += amount if field == "freed" else 0
            count += amount if field == "compactions" else 0
    return int(freed), int(count)


def retention_rollup(*, by: str) -> list[dict[str, Any]]:
    """sessions_app.compactions.retention.retention_rollup over all time, from the roll-up."""
    rows = list(
        CompactionRollup.objects.filter(compactions__gt=0).values_list(
            "day",
            "strategy",
            "policy_id",
            "model",
            "compactions",
            "scored",
            "retention_sum",
            "freed",
            "spent",
            "probes",
            "reread",
            "flagged",
        )
    )
    names = {}
    if by == "policy":
        names = dict(CompactionPolicy.objects.filter(pk__in={r[2] for r in rows}).values_list("pk", "name"))
    groups: dict[Any, list] = {}
    for day, strategy, policy, model, *sums in rows:
        key = {"strategy": strategy, "policy": names.get(policy), "model": model, "day": day}[by]
        group = groups.setdefault(key, [0] * len(sums))
        for i, amount in enumerate(sums):
            group[i] += amount
    return [
        {
            "key": key,
            "compactions": n,
            "retention": (score_sum / scored) if scored else None,
            "freed": freed,
            "spent": spent,
            "probes": probes,
            "reread": reread,
            "flagged": flagged,
        }
        for key, (n, scored, score_sum, freed, spent, probes, reread, flagged) in sorted(
            groups.items(), key=lambda kv: (kv[0] is None, kv[0] if kv[0] is not None else "")
        )
    ]
