"""Reads for the live pages: fleet rows, a session's token chart, its timeline, its history entries and the lines a
websocket batch covers. Each read is bounded (a limit or a seq range), so a busy page stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery

from compaction_app.models import Compaction, CompactionAttempt
from compactweb import statements
from sessions_app.fleet.filter import FleetFilter
from sessions_app.live.token_chart import Point
from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session, SimulatorRun
from sessions_app.rollout import projection as p

CHART_POINTS = 600  # readings kept on the chart: enough for hours of turns, bounded per render
FLEET_LIMIT = 500


def fleet_sessions(*, fleet_filter: FleetFilter) -> QuerySet[Session]:
    sessions = Session.objects.select_related("provider", "policy")
    if fleet_filter.state:
        sessions = sessions.filter(state=fleet_filter.state)
    if fleet_filter.provider:
        sessions = sessions.filter(provider_id=fleet_filter.provider)
    if fleet_filter.policy:
        sessions = sessions.filter(policy_id=fleet_filter.policy)
    if fleet_filter.text:
        sessions = sessions.filter(title__icontains=fleet_filter.text)
    return sessions.order_by("-created_at", "-pk")[:FLEET_LIMIT]


def attempt_view(attempt: CompactionAttempt) -> dict[str, Any]:
    """What the board shows of a compaction attempt (the last one of a session, or one in progress)."""
    return {
        "id": attempt.pk,
        "compaction_id": attempt.compaction_id,
        "status": attempt.status,
        "trigger": attempt.trigger,
        "reason": attempt.reason,
        "phase": attempt.phase,
        "implementation": attempt.implementation,
        "strategy": attempt.strategy,
        "tokens_before": attempt.tokens_before,
        "tokens_after": attempt.tokens_after,
        "error_kind": attempt.error_kind,
        "error_message": attempt.error_message,
        "error_http_status": attempt.error_http_status,
        "retries": attempt.retries,
        "duration_ms": attempt.duration_ms,
        "started_at": attempt.started_at,
        "retention_score": attempt.compaction.retention_score if attempt.compaction_id else None,
        "flagged": attempt.compaction.flagged if attempt.compaction_id else "",
    }


def last_attempts(*, session_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The newest compaction attempt of each session (two queries whatever the number of sessions)."""
    ids = list(session_ids)
    if not ids:
        return {}
    newest = CompactionAttempt.objects.filter(session=OuterRef("pk")).order_by("-started_at", "-pk").values("pk")[:1]
    attempt_ids = [
        a for a in Session.objects.filter(pk__in=ids).annotate(a=Subquery(newest)).values_list("a", flat=True) if a
    ]
    attempts = CompactionAttempt.objects.filter(pk__in=attempt_ids).select_related("compaction")
    return {a.session_id: attempt_view(a) for a in attempts}


def latest_attempt(*, session_id: int) -> dict[str, Any] | None:
    return last_attempts(session_ids=[session_id]).get(session_id)


def token_points(*, session: Session, limit: int = CHART_POINTS) -> list[Point]:
    """The window's active tokens at each usage reading and after each history replacement, oldest first.

    Usage readings are the `token_count` lines' totals (what the server counted); a replacement's value is the
    installed history's stored tokens plus the base instructions (spec §3.2: the meter restarts from the estimate).
    A compaction's drop carries the meter value it fired at (its tokens before) as its peak.
    """
    rows = (
        RolloutLine.objects.filter(session=session)
        .filter(Q(kind=p.EVENT_MSG, payload__type="token_count") | Q(kind__in=p.HISTORY_INSTALLING_KINDS))
        .order_by("-seq")
        .values_list("seq", "kind", "payload", "tokens")[:limit]
    )
    rows = list(rows)
    drop_seqs = [seq for seq, kind, _, _ in rows if kind != p.EVENT_MSG]
    peaks = dict(
        Compaction.objects.filter(session=session, rollout_seq__in=drop_seqs).values_list("rollout_seq", "tokens_before")
    ) if drop_seqs else {}
    points = []
    for seq, kind, payload, tokens in reversed(rows):
        if kind == p.EVENT_MSG:
            usage = (payload.get("info") or {}).get("last_token_usage") or {}
            total = int(usage.get("total_tokens") or 0)
            if total:
                points.append(Point(seq=seq, tokens=total))
        else:
            points.append(Point(seq=seq, tokens=int(tokens) + session.meter_base_tokens, drop=True, peak=peaks.get(seq)))
    return points


@dataclass(frozen=True)
class TimelineEntry:
    window_number: int
    window_id: str
    opened_at: Any
    reason: str
    opened_by_seq: int | None
    compaction: Compaction | None


TIMELINE_LIMIT = 50  # windows shown: a long session's timeline costs the same to render as a short one's


def timeline(*, session: Session, limit: int = TIMELINE_LIMIT) -> list[TimelineEntry]:
    """The newest `limit` windows, each with the compaction that opened it (if one did), newest first (two
    bounded queries, whatever the session's length; the compaction list and the rollout keep the rest)."""
    windows = list(ContextWindow.objects.filter(session=session).order_by("-opened_at", "-pk")[:limit])
    opened_by = [w.opened_by_seq for w in windows if w.opened_by_seq is not None]
    compactions = {
        c.rollout_seq: c
        for c in Compaction.objects.filter(session=session, rollout_seq__in=opened_by).defer("summary")
    }
    return [
        TimelineEntry(
            window_number=w.number, window_id=w.window_id, opened_at=w.opened_at, reason=w.reason,
            opened_by_seq=w.opened_by_seq,
            compaction=compactions.get(w.opened_by_seq) if w.opened_by_seq is not None else None,
        )
        for w in windows
    ]


@dataclass(frozen=True)
class HistoryEntry:
    """One item of the live history as the page renders it."""

    item: dict[str, Any]
    tokens: int
    seq: int
    position: int


def history_entries(*, session: Session) -> list[HistoryEntry]:
    rows = LiveItem.objects.filter(session=session).order_by("position").values_list(
        "item", "tokens", "source_seq", "position"
    )
    return [HistoryEntry(item=i, tokens=t, seq=s, position=pos) for i, t, s, pos in rows]


_LINES_BETWEEN = statements.Select(RolloutLine, where=("session", "seq__gt", "seq__lte"), order_by=("seq",))


def lines_between(*, session_id: int, after_seq: int, upto_seq: int) -> list[RolloutLine]:
    """The rollout lines a websocket batch covers: after_seq < seq <= upto_seq, in order. A statement built once
    (compactweb.statements): every live event of every watched session runs it."""
    return _LINES_BETWEEN.all(where=(session_id, after_seq, upto_seq))


def compaction_at(*, session_id: int, rollout_seq: int) -> Compaction | None:
    return Compaction.objects.filter(session_id=session_id, rollout_seq=rollout_seq).first()


def recent_compactions(*, session: Session, limit: int = 20) -> list[Compaction]:
    return list(Compaction.objects.filter(session=session).order_by("-rollout_seq")[:limit])


def simulator_run(*, session_id: int) -> dict[str, Any] | None:
    """What the session page shows of the simulated run driving the session (None: not simulated)."""
    return (
        SimulatorRun.objects.filter(session_id=session_id)
        .values("id", "status", "scenario", "steps_done", "turns_per_minute", "loop", "last_error").first()
    )
