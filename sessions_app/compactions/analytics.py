"""The aggregates of the analytics page over compaction attempts (spec §10)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from compaction_app.engine.percentiles import percentile
from compaction_app.engine.vocabulary import STRATEGY_MEMENTO
from compaction_app.models import CompactionAttempt

# The analytics dimensions: `method` is compactweb's choice, `strategy` Codex's analytics field (spec §10).
ANALYTICS_DIMENSIONS = ("trigger", "reason", "implementation", "phase", "method", "strategy", "status")


def compaction_analytics(
    *, policy_id: int | None = None, provider_id: int | None = None, since: datetime | None = None
) -> dict[str, Any]:
    """Aggregates for the analytics page over attempts (spec §10): counts by trigger, reason, implementation,
    phase and status, per day; tokens saved by completed attempts; failure rate; latency percentiles."""
    attempts = CompactionAttempt.objects.all()
    if policy_id is not None:
        attempts = attempts.filter(session__policy_id=policy_id)
    if provider_id is not None:
        attempts = attempts.filter(session__provider_id=provider_id)
    if since is not None:
        attempts = attempts.filter(started_at__gte=since)
    rows = list(attempts.values(
        "started_at", "trigger", "reason", "implementation", "phase", "strategy", "status", "tokens_before",
        "tokens_after", "duration_ms",
    ))
    for row in rows:
        # The stored column holds compactweb's method; Codex's `strategy` is `memento` for all of them (§10).
        row["method"], row["strategy"] = row["strategy"], STRATEGY_MEMENTO
    dimensions = ANALYTICS_DIMENSIONS
    totals = {d: dict(Counter(r[d] for r in rows)) for d in dimensions}
    per_day: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        day = per_day.setdefault(row["started_at"].date().isoformat(), {d: {} for d in dimensions})
        for d in dimensions:
            day[d][row[d]] = day[d].get(row[d], 0) + 1
    finished = [r for r in rows if r["status"] != CompactionAttempt.Status.RUNNING]
    failed = [r for r in finished if r["status"] == CompactionAttempt.Status.FAILED]
    completed = [r for r in finished if r["status"] == CompactionAttempt.Status.COMPLETED]
    saved = [r["tokens_before"] - (r["tokens_after"] or 0) for r in completed]
    durations = sorted(r["duration_ms"] for r in finished if r["duration_ms"] is not None)
    return {
        "attempts": len(rows),
        "totals": totals,
        "per_day": dict(sorted(per_day.items())),
        "tokens_saved": sum(saved),
        "tokens_saved_mean": (sum(saved) / len(saved)) if saved else None,
        "failure_rate": (len(failed) / len(finished)) if finished else None,
        "latency_ms": {"p50": percentile(durations, 50), "p90": percentile(durations, 90),
                       "p99": percentile(durations, 99), "count": len(durations)},
    }
