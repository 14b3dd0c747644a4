"""Reads for the live pages: fleet rows, a session's token chart, its timeline, its history entries and the lines a
websocket batch covers. Each read is bounded (a limit or a seq range), so a busy page stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, Least, NullIf

from compaction_app.models import Compaction, CompactionAttempt, CompactionPolicy
from sessions_app.fleet.faults import fault_blamed, fault_lines
from sessions_app.fleet.filter import STATES, FleetFilter
from sessions_app.fleet.paging import NEWEST, OLDEST, PAGE_SIZE, FleetPage
from sessions_app.fleet.triage import ENDED_STATES, FINISHED, UNDRIVEN_KINDS
from sessions_app.live.token_chart import Point
from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session, SimulatorRun
from sessions_app.rollout import projection as p

# sessions_app.fleet.triage.is_finished, in SQL
FINISHED_Q = Q(state__in=ENDED_STATES) | Q(state=Session.State.IDLE, source__in=UNDRIVEN_KINDS)

CHART_POINTS = 600  # readings kept on the chart: enough for hours of turns, bounded per render


def _filtered(fleet_filter: FleetFilter) -> QuerySet[Session]:
    sessions = Session.objects.all()
    if fleet_filter.state == FINISHED:
        sessions = sessions.filter(FINISHED_Q)
    elif fleet_filter.state:
        sessions = sessions.filter(state=fleet_filter.state)
    if fleet_filter.source:
        sessions = sessions.filter(source=fleet_filter.source)
    if fleet_filter.provider:
        sessions = sessions.filter(provider_id=fleet_filter.provider)
    if fleet_filter.policy:
        sessions = sessions.filter(policy_id=fleet_filter.policy)
    if fleet_filter.text:
        sessions = sessions.filter(title__icontains=fleet_filter.text)
    return sessions


def _with_fill(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """Annotate `fill`: tokens in the window over the auto-compact limit, in SQL, as the meter computes them in
    Python (compaction_app.engine.meter.active_total over compaction_app.limits.auto_compact_limit; a limit of 0
    measures against the window, as the meter's colour does)."""
    big = BigIntegerField()
    tokens = ExpressionWrapper(F("meter_usage_total") + F("meter_since_model") + Case(
        When(meter_reasoning_included=True, then=Value(0)), default=F("meter_reasoning_before_user"), output_field=big,
    ), output_field=big)
    window = Cast(F("provider__context_window"), big)
    ninety = ExpressionWrapper(window * 9 / 10, output_field=big)
    configured = Cast(F("policy__auto_compact_token_limit"), big)
    limit = Case(
        When(policy__auto_compact_scope=CompactionPolicy.Scope.BODY_AFTER_PREFIX,
             policy__auto_compact_token_limit__isnull=False, then=configured),
        default=Least(Coalesce(configured, ninety), ninety), output_field=big,
    )
    real = FloatField()
    fill = Cast(tokens, real) / Cast(Coalesce(NullIf(limit, 0), window), real)
    return sessions.annotate(fill=fill)


def _ordered(sessions: QuerySet[Session], sort: str) -> QuerySet[Session]:
    if sort == OLDEST:
        return sessions.order_by("created_at", "pk")
    if sort == NEWEST:
        return sessions.order_by("-created_at", "-pk")
    # the triage order (sessions_app.fleet.triage): sessions that can still compact first, nearest the limit first
    finished = Case(When(FINISHED_Q, then=Value(1)), default=Value(0), output_field=IntegerField())
    return _with_fill(sessions).annotate(finished=finished).order_by(
        "finished", F("fill").desc(nulls_last=True), "-pk")


def fleet_page(*, fleet_filter: FleetFilter, page: FleetPage) -> list[Session]:
    """The sessions of one page of the board: the page's own rows (`page.rows`, those still matching the filter)
    when it has rendered already, else the page ranked now (offset pagination: a page of PAGE_SIZE rows, one
    query; the sort's key is computed per row, so the database sorts the filtered fleet, a few ms at 1,000)."""
    sessions = _filtered(fleet_filter).select_related("provider", "policy")
    if page.rows is not None:
        return list(_ordered(sessions.filter(pk__in=page.rows), page.sort))
    return list(_ordered(sessions, page.sort)[page.offset:page.offset + PAGE_SIZE])


def fleet_counts(*, fleet_filter: FleetFilter) -> dict[str, Any]:
    """The whole fleet's sessions by state, and how many match the filter: two grouped counts."""
    by_state = dict(Session.objects.order_by().values_list("state").annotate(n=Count("pk")))
    matching = (sum(by_state.values()) if not fleet_filter.active
                else _filtered(fleet_filter).order_by().count())
    return {"total": sum(by_state.values()), "matching": matching,
            "by_state": {state: by_state.get(state, 0) for state in STATES}}


def fleet_sources() -> list[str]:
    """The kinds of session the fleet holds (the kind filter's choices)."""
    return sorted(Session.objects.order_by().values_list("source", flat=True).distinct())


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
        # A completed attempt shows its compaction's window tokens (the inspector's figures; the attempt's own are
        # Codex's analytics, which differ on purpose: token_definitions); one still running or failed, the meter.
        "tokens_before": attempt.compaction.tokens_before if attempt.compaction_id else attempt.tokens_before,
        "tokens_after": attempt.compaction.tokens_after if attempt.compaction_id else attempt.tokens_after,
        "error_kind": attempt.error_kind,
        "error_message": attempt.error_message,
        "error_http_status": attempt.error_http_status,
        "retries": attempt.retries,
        "duration_ms": attempt.duration_ms,
        "started_at": attempt.started_at,
        "retention_score": attempt.compaction.retention_score if attempt.compaction_id else None,
        "retention_opaque": bool(attempt.compaction_id and (attempt.compaction.retention or {}).get("opaque")),
        "retention_visible": (attempt.compaction.retention or {}).get("visible_score") if attempt.compaction_id
        else None,
        "flagged": attempt.compaction.flagged if attempt.compaction_id else "",
    }


def last_attempts(*, session_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The newest compaction attempt of each session (two queries whatever the number of sessions)."""
    ids = list(session_ids)
    if not ids:
        return {}
    newest = CompactionAttempt.objects.filter(session=OuterRef("pk")).order_by("-started_at", "-pk").values("pk")[:1]
    rows = list(Session.objects.filter(pk__in=ids).annotate(a=Subquery(newest)).values_list("pk", "a", "fault_injection"))
    attempts = CompactionAttempt.objects.filter(pk__in=[a for _, a, _ in rows if a]).select_related("compaction")
    views = {a.session_id: attempt_view(a) for a in attempts}
    # A compaction Codex ran before the session came here (an import, a followed file) has no attempt of ours: it is
    # still the session's last compaction, counted by the Compactions column like any other.
    views.update(_recorded_compactions(session_ids=[pk for pk, a, _ in rows if not a]))
    for session_id, _, injection in rows:
        view = views.get(session_id)
        if view is not None and view["status"] == CompactionAttempt.Status.FAILED and (injection or {}).get("fault"):
            # Only a failed attempt of a session with a fault on pays for the fault's words.
            view["fault_blame"] = fault_blamed(
                lines=fault_lines(session_id=session_id, fault_injection=injection), attempt=view)
    return views


def _recorded_compactions(*, session_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The newest Compaction row of each session that has no attempt, in attempt_view's shape (one query)."""
    if not session_ids:
        return {}
    newest = Compaction.objects.filter(session=OuterRef("session_id")).order_by("-rollout_seq").values("pk")[:1]
    found = Compaction.objects.filter(session_id__in=session_ids, pk=Subquery(newest))
    return {c.session_id: {
        "id": None, "compaction_id": c.pk, "status": CompactionAttempt.Status.COMPLETED, "trigger": c.trigger,
        "reason": c.reason, "phase": c.phase, "implementation": c.implementation, "strategy": c.strategy,
        "tokens_before": c.tokens_before, "tokens_after": c.tokens_after, "error_kind": "", "error_message": "",
        "error_http_status": None, "retries": 0, "duration_ms": None, "started_at": c.created_at,
        "retention_score": c.retention_score, "retention_opaque": bool((c.retention or {}).get("opaque")),
        "retention_visible": (c.retention or {}).get("visible_score"), "flagged": c.flagged, "recorded": True,
    } for c in found}


def latest_attempt(*, session_id: int) -> dict[str, Any] | None:
    return last_attempts(session_ids=[session_id]).get(session_id)


@dataclass(frozen=True)
class ChartReading:
    """One rollout line the token chart reads: a usage reading (`tokens` its total; 0 draws no point but still
    takes one of the chart's `CHART_POINTS` places) or a history replacement (`drop`; `tokens` the installed
    history's stored tokens, without the base instructions, and `peak` its compaction's tokens before, if any)."""

    seq: int
    tokens: int
    drop: bool = False
    peak: int | None = None


def _usage_total(payload: dict[str, Any]) -> int:
    usage = (payload.get("info") or {}).get("last_token_usage") or {}
    return int(usage.get("total_tokens") or 0)


def chart_readings(*, session: Session, limit: int = CHART_POINTS, upto_seq: int | None = None) -> list[ChartReading]:
    """The newest `limit` lines the chart reads (up to `upto_seq` when given), oldest first: two bounded queries."""
    rows = (
        RolloutLine.objects.filter(session=session)
        .filter(Q(kind=p.EVENT_MSG, payload__type="token_count") | Q(kind__in=p.HISTORY_INSTALLING_KINDS))
    )
    if upto_seq is not None:
        rows = rows.filter(seq__lte=upto_seq)
    rows = list(rows.order_by("-seq").values_list("seq", "kind", "payload", "tokens")[:limit])
    drop_seqs = [seq for seq, kind, _, _ in rows if kind != p.EVENT_MSG]
    peaks = _peaks(session_id=session.pk, seqs=drop_seqs)
    return [
        ChartReading(seq=seq, tokens=_usage_total(payload)) if kind == p.EVENT_MSG
        else ChartReading(seq=seq, tokens=int(tokens), drop=True, peak=peaks.get(seq))
        for seq, kind, payload, tokens in reversed(rows)
    ]


def is_chart_line(line: RolloutLine) -> bool:
    """Whether the chart reads this line: a `token_count` event or a history-installing line (the test
    `chart_readings`' query makes in SQL)."""
    return line.kind in p.HISTORY_INSTALLING_KINDS or (
        line.kind == p.EVENT_MSG and line.payload.get("type") == "token_count")


def chart_readings_of(*, session_id: int, lines: Iterable[RolloutLine]) -> list[ChartReading]:
    """The readings `chart_readings` would give for these lines (in their order), without reading them again: one
    query for the peaks when a line replaced the history, none otherwise."""
    chart_lines = [ln for ln in lines if is_chart_line(ln)]
    peaks = _peaks(session_id=session_id, seqs=[ln.seq for ln in chart_lines if ln.kind != p.EVENT_MSG])
    return [
        ChartReading(seq=ln.seq, tokens=_usage_total(ln.payload)) if ln.kind == p.EVENT_MSG
        else ChartReading(seq=ln.seq, tokens=int(ln.tokens), drop=True, peak=peaks.get(ln.seq))
        for ln in chart_lines
    ]


def _peaks(*, session_id: int, seqs: list[int]) -> dict[int, int | None]:
    """The tokens before of the compactions installed at these seqs (a rollback or a redo has none)."""
    if not seqs:
        return {}
    return dict(
        Compaction.objects.filter(session_id=session_id, rollout_seq__in=seqs).values_list("rollout_seq", "tokens_before")
    )


def point_of(reading: ChartReading, *, base_tokens: int) -> Point | None:
    """The chart point of a reading (None: a usage line without a total draws none). A replacement's value is the
    installed history's stored tokens plus the base instructions (spec §3.2: the meter restarts from the estimate)."""
    if not reading.drop:
        return Point(seq=reading.seq, tokens=reading.tokens) if reading.tokens else None
    return Point(seq=reading.seq, tokens=reading.tokens + base_tokens, drop=True, peak=reading.peak)


def token_points(*, session: Session, limit: int = CHART_POINTS, upto_seq: int | None = None) -> list[Point]:
    """The window's active tokens at each usage reading and after each history replacement, oldest first.

    Usage readings are the `token_count` lines' totals (what the server counted); a replacement's value is the
    installed history's stored tokens plus the base instructions (spec §3.2: the meter restarts from the estimate).
    A compaction's drop carries the meter value it fired at (its tokens before) as its peak.
    """
    points = (point_of(r, base_tokens=session.meter_base_tokens)
              for r in chart_readings(session=session, limit=limit, upto_seq=upto_seq))
    return [pt for pt in points if pt is not None]


def window_limits(*, session_id: int, points: list[Point]) -> tuple[tuple[int, int | None], ...]:
    """The auto-compact limit each window on the chart opened with, as (seq it opened at, limit), oldest first, for
    `token_chart.chart_geometry`: none without a history replacement on the chart (one window: the current limit),
    else two bounded queries (the windows the replacements opened, and the one the first reading falls in)."""
    drops = [pt.seq for pt in points if pt.drop]
    if not drops:
        return ()
    windows = ContextWindow.objects.filter(session_id=session_id)
    opened = list(windows.filter(opened_by_seq__gte=points[0].seq).order_by("opened_by_seq")
                  .values_list("opened_by_seq", "auto_compact_limit"))
    first = (windows.filter(Q(opened_by_seq__lt=points[0].seq) | Q(opened_by_seq__isnull=True))
             .order_by("-number", "-pk").values_list("auto_compact_limit", flat=True).first())
    return ((0, first), *opened)


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


# The session page shows the newest items of the history, older ones a page at a time on request (issue 27: the
# page of a 200,000-item import was 42 MB of HTML).
HISTORY_PAGE_SIZE = 200


def history_entries(*, session: Session, before: int | None = None,
                    size: int = HISTORY_PAGE_SIZE) -> list[HistoryEntry]:
    """The `size` items of the live history just before position `before` (default: the newest), oldest first.
    Positions run 0..n-1 in the window, so the first entry's position is how many older items there are."""
    rows = LiveItem.objects.filter(session=session)
    if before is not None:
        rows = rows.filter(position__lt=before)
    newest = rows.order_by("-position").values_list("item", "tokens", "source_seq", "position")[:size]
    return [HistoryEntry(item=i, tokens=t, seq=s, position=pos) for i, t, s, pos in reversed(newest)]


def history_tail(entries: list[HistoryEntry], *, size: int = HISTORY_PAGE_SIZE) -> tuple[list[HistoryEntry], int]:
    """The newest `size` of a full history in memory, and how many older ones are left out."""
    older = max(0, len(entries) - size)
    return entries[older:], older


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
