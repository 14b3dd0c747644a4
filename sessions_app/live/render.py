"""Server-side rendering of the live pages' fragments, shared by the first page load, the websocket updates and the
HTTP re-sync: each fragment is one named partial of the page template, rendered with `oob=True` when it travels
as an htmx out-of-band swap.

Every websocket message starts with a marker element (`#live-seq`) carrying the seqs it covers (`data-from`,
`data-seq`), or, for transient progress, the `data-after-seq` the client should already have. static/js/live.js
compares them with the page's own marker and re-syncs over HTTP on a gap or a reconnect.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson
from django.template.loader import render_to_string

from compaction_app.engine.lru import Lru
from compaction_app.limits import session_pin_budget
from compaction_app.models import CompactionPolicy, Provider
from sessions_app.compactions.alerts import recent_alerts
from sessions_app.compactions.queue import queued_for
from sessions_app.fleet.faults import fault_panel, faults_apply
from sessions_app.fleet.filter import FleetFilter
from sessions_app.fleet.paging import FleetPage
from sessions_app.live import selectors as ls
from sessions_app.live.token_chart import Chart, Point, chart_geometry
from sessions_app.models import Session
from sessions_app.rollout import projection as p
from sessions_app.rollout import selectors
from sessions_app.rollout.events import GATEWAY_NOTICE, GATEWAY_REQUESTS
from sessions_app.transfer import codex_sources
from sessions_app.transfer.importer import FOLLOWED

SESSION_PAGE = "sessions_app/session_detail.html"
CODEX_FILE = "sessions_app/partials/codex_file.html"
FLEET_PAGE = "sessions_app/fleet.html"
MAX_BATCH_LINES = 400  # a client further behind than this re-syncs over HTTP instead of replaying lines
BATCH_CACHE_SIZE = 512
ROW_CACHE_SIZE = 2048  # fleet rows a process keeps rendered (a row is about 3 KB)
ROW_CACHE_SECONDS = 1.0  # how long a rendered row serves: its "ago" texts and stuck timers move with the clock
CHART_CACHE_SIZE = 128  # watched sessions whose chart a process keeps (a full one: 600 readings and points, ~175 KB)


def _partial(template: str, name: str, context: Mapping[str, Any]) -> str:
    return render_to_string(f"{template}#{name}", dict(context))


# --- session page --------------------------------------------------------------------------------------------------


def chart_for(*, session: Session, summary: Mapping[str, Any]):
    points = ls.token_points(session=session)
    return chart_geometry(
        points,
        context_window=summary["context_window"],
        limit=summary["auto_compact_limit"],
        window_limits=ls.window_limits(session_id=session.pk, points=points),
    )


def session_context(*, session: Session) -> dict[str, Any]:
    """Everything the session page's live region shows, read at one point of the rollout (`seq`)."""
    summary = selectors.session_summary(session=session)
    return {
        "s": summary,
        "session": session,
        "seq": summary["last_seq"],
        **history_context(ls.history_entries(session=session)),
        "chart": chart_for(session=session, summary=summary),
        "timeline": ls.timeline(session=session),
        "attempt": ls.latest_attempt(session_id=session.pk),
        "queued": queued_for(session_id=session.pk),
        "run": ls.simulator_run(session_id=session.pk),
        # Only a session whose requests reach the simulated model has a fault panel (issue 47 item 8).
        "faults": fault_panel(session=session) if faults_apply(session=session) else None,
        "progress": None,
    }


def history_context(entries: list[ls.HistoryEntry], older: int | None = None) -> dict[str, Any]:
    """A page of the history as the `history_page` partial shows it: the entries, and how many older items precede
    them (positions run 0..n-1, so that is the first entry's position, and the "show older" control asks for the
    page before it)."""
    if older is None:
        older = entries[0].position if entries else 0
    return {"entries": entries, "older": older, "history_page_size": ls.HISTORY_PAGE_SIZE}


def history_page(*, session: Session, before: int) -> str:
    """The page of older items before position `before`: what the "show older" control swaps itself for."""
    context = {"s": {"id": session.pk}, **history_context(ls.history_entries(session=session, before=before))}
    return _partial(SESSION_PAGE, "history_page", context)


def session_region(*, session: Session) -> str:
    """The whole live region as out-of-band fragments: the HTTP re-sync answer."""
    context = {**session_context(session=session), "oob": True}
    names = ("marker", "session_head", "chart", "history", "compaction_status", "timeline", "run_controls")
    followed = file_lines(session_id=session.pk) if session.source == FOLLOWED else ""
    return "".join(_partial(SESSION_PAGE, n, context) for n in names) + followed


def file_lines(*, session_id: int) -> str:
    """The followed file's line count as an out-of-band fragment: it grows with every batch the follower reads
    (issue 47 item 8: the card said "61 lines" of a file of 122)."""
    lines = codex_sources.line_count(session_id=session_id)
    return _partial(CODEX_FILE, "file_lines", {"codex_file": {"lines": lines}, "oob": True}) if lines is not None else ""


def marker(*, seq: int, from_seq: int | None = None, after_seq: int | None = None, kind: str = "batch") -> str:
    return _partial(
        SESSION_PAGE, "marker", {"seq": seq, "from_seq": from_seq, "after_seq": after_seq, "kind": kind, "oob": True}
    )


def hello(*, session_id: int) -> tuple[str, int, str] | None:
    """The first message of a connection, the session's newest seq (so a page that loaded earlier re-syncs) and
    its thread id, read in one query; None when there is no such session."""
    row = Session.objects.filter(pk=session_id).values_list("last_seq", "thread_id").first()
    if row is None:
        return None
    seq = row[0] or 0
    return marker(seq=seq, kind="hello"), seq, str(row[1])


def _replacement_entries(line) -> list[ls.HistoryEntry]:
    history = line.payload.get("replacement_history") or []
    counts = line.item_tokens or [0] * len(history)
    return [
        ls.HistoryEntry(item=item, tokens=int(t), seq=line.seq, position=i)
        for i, (item, t) in enumerate(zip(history, counts, strict=False))
    ]


def _changes_compaction_state(line) -> bool:
    if line.kind in p.COMPACTION_STATE_KINDS:
        return True
    return line.kind == p.EVENT_MSG and line.payload.get("type") in p.COMPACTION_EVENT_TYPES


# Rendered batches by (thread id, after_seq, upto_seq). Every page watching a session asks for the same batch when
# an event arrives, and a batch's content never changes (the rollout is append-only; its snapshots are those of
# `upto_seq`), so it is rendered once per event, not once per watcher.
batch_cache: Lru[tuple, str] = Lru(BATCH_CACHE_SIZE)


@dataclass(frozen=True)
class ChartState:
    """A session's token chart as of rollout line `seq`: the readings `ls.chart_readings(upto_seq=seq)` gives (the
    newest CHART_POINTS chart lines up to `seq`) and, in the same order, their points (None: no point) with the
    base instructions' tokens `base_tokens` (a replacement's point adds them)."""

    seq: int
    readings: tuple[ls.ChartReading, ...]
    base_tokens: int
    points: tuple[Point | None, ...]

    def chart_points(self) -> list[Point]:
        return [pt for pt in self.points if pt is not None]


# The newest ChartState of each watched session, by thread id (a session id can come back after a delete on SQLite;
# a thread id does not). A batch extends its session's state with the chart lines among its own lines instead of
# reading the chart's readings again; anything else (no state, a state the batch does not start from) reads them in
# full. States are immutable: a render extends the one it got and puts a new one, unless the entry is already at a
# later seq (a render of an older batch finishing last).
chart_cache: Lru[str, ChartState] = Lru(CHART_CACHE_SIZE, keeps=lambda current, new: current.seq > new.seq)


def _points_of(readings: Iterable[ls.ChartReading], base_tokens: int) -> tuple[Point | None, ...]:
    return tuple(ls.point_of(r, base_tokens=base_tokens) for r in readings)


def chart_state(*, session: Session, after_seq: int, upto: int, lines: list) -> ChartState:
    """The session's chart as of `upto`, given `lines`, every rollout line after `after_seq` up to `upto` (a batch's
    lines): the cached state extended with the chart lines among them when it is at a seq in [after_seq, upto],
    else read in full (two bounded queries). Either way the same points as `ls.token_points(upto_seq=upto)`."""
    key = str(session.thread_id)
    base = session.meter_base_tokens
    state = chart_cache.get(key)
    if state is not None and after_seq <= state.seq <= upto:
        new = ls.chart_readings_of(session_id=session.pk, lines=[ln for ln in lines if ln.seq > state.seq])
        readings = (state.readings + tuple(new))[-ls.CHART_POINTS:]
        if base == state.base_tokens:
            points = (state.points + _points_of(new, base))[-ls.CHART_POINTS:]
        else:  # the base instructions changed (a new model or instructions): every replacement's value moves
            points = _points_of(readings, base)
    else:
        readings = tuple(ls.chart_readings(session=session, limit=ls.CHART_POINTS, upto_seq=upto))
        points = _points_of(readings, base)
    state = ChartState(seq=upto, readings=readings, base_tokens=base, points=points)
    chart_cache.put(key, state)
    return state


def advance_chart_state(*, session: Session, after_seq: int, upto: int) -> None:
    """A batch after `after_seq` up to `upto` without a chart line: the session's state, if it is at a seq in
    [after_seq, upto], holds as of `upto` too (else the next batch would read the chart in full)."""
    key = str(session.thread_id)
    state = chart_cache.get(key)
    if state is not None and after_seq <= state.seq < upto:
        chart_cache.put(key, replace(state, seq=upto))


def batch_chart(*, session: Session, summary: Mapping[str, Any], after_seq: int, upto: int, lines: list) -> Chart:
    """The chart a batch renders: `chart_for` as of `upto`, from the process's chart state when it can."""
    points = chart_state(session=session, after_seq=after_seq, upto=upto, lines=lines).chart_points()
    return chart_geometry(
        points,
        context_window=summary["context_window"],
        limit=summary["auto_compact_limit"],
        window_limits=ls.window_limits(session_id=session.pk, points=points),
    )


def session_batch(
    *, session_id: int, after_seq: int, upto_seq: int | None = None, summary: Mapping[str, Any] | None = None
) -> tuple[str, int]:
    """The update for every rollout line after `after_seq` up to `upto_seq` (default: the session's newest):
    returns (html, new seq). `summary` is the session summary at `upto_seq` when the caller has it (a live
    event carries it), else it is read.

    Appended items are rendered one by one (appended at the end of the history); a line that installs a history
    re-renders the whole history; usage and replacements re-render the chart; compaction lines re-render the
    timeline and the compaction status. Returns ("", after_seq) when there is nothing new.
    """
    session = selectors.get_session(session_id=session_id)
    upto = session.last_seq if upto_seq is None else min(upto_seq, session.last_seq)
    if upto <= after_seq:
        return "", after_seq
    key = batch_key(thread_id=str(session.thread_id), after_seq=after_seq, upto_seq=upto)
    cached = batch_cache.get(key)
    if cached is not None:
        return cached, upto
    if summary is None or summary.get("last_seq") != upto:
        summary = selectors.session_summary(session=session)
    html = _render_batch(session=session, summary=summary, after_seq=after_seq, upto=upto)
    batch_cache.put(key, html)
    return html, upto


def batch_key(*, thread_id: str, after_seq: int, upto_seq: int) -> tuple:
    return (thread_id, after_seq, upto_seq)


def _render_batch(*, session: Session, summary: Mapping[str, Any], after_seq: int, upto: int) -> str:
    session_id = session.pk
    if upto - after_seq > MAX_BATCH_LINES:
        return marker(seq=upto, from_seq=upto, kind="resync")
    lines = selectors.lines_between(session_id=session_id, after_seq=after_seq, upto_seq=upto)
    context: dict[str, Any] = {"s": summary, "session": session, "seq": upto, "oob": True, "progress": None}
    parts = [marker(seq=upto, from_seq=after_seq + 1), _partial(SESSION_PAGE, "session_head", context)]

    replaced_at = max((i for i, ln in enumerate(lines) if ln.kind in p.HISTORY_INSTALLING_KINDS), default=None)
    start = 0 if replaced_at is None else replaced_at + 1
    appended = [
        ls.HistoryEntry(item=ln.payload, tokens=ln.tokens, seq=ln.seq, position=-1)
        for ln in lines[start:]
        if ln.kind == p.RESPONSE_ITEM
    ]
    if replaced_at is not None:
        entries, older = ls.history_tail(_replacement_entries(lines[replaced_at]) + appended)
        parts.append(_partial(SESSION_PAGE, "history", {**context, **history_context(entries, older)}))
    elif appended:
        parts.append(_partial(SESSION_PAGE, "history_append", {**context, "entries": appended}))
        parts.append(_partial(SESSION_PAGE, "history_count", context))

    if any(ls.is_chart_line(ln) for ln in lines):
        chart = batch_chart(session=session, summary=summary, after_seq=after_seq, upto=upto, lines=lines)
        parts.append(_partial(SESSION_PAGE, "chart", {**context, "chart": chart}))
    else:
        advance_chart_state(session=session, after_seq=after_seq, upto=upto)
    if session.source == FOLLOWED:
        parts.append(file_lines(session_id=session_id))
    parts.append(pin_budget_total(session=session))
    parts.append(live_faults(session=session))
    if any(_changes_compaction_state(ln) for ln in lines):
        parts.append(
            _partial(SESSION_PAGE, "compaction_status", {**context, "attempt": ls.latest_attempt(session_id=session_id),
                                                         "queued": queued_for(session_id=session_id)})
        )
        parts.append(_partial(SESSION_PAGE, "timeline", {**context, "timeline": ls.timeline(session=session)}))
    return "".join(parts)


PINS_CARD = "compaction_app/partials/pins.html"


def pin_budget_total(*, session: Session) -> str:
    """The pins card's budget, out of band: it follows the session's model, which a model switch changes between
    turns (a page kept the old budget: every live counter is live or absent, issue 47). No query: the session
    is read with its provider and policy."""
    budget, source = session_pin_budget(provider=session.provider, policy=session.policy)
    return _partial(PINS_CARD, "pin_budget_total", {"pin_budget": {"budget": budget, "source": source}, "oob": True})


def _compaction_job_refusal(event: Mapping[str, Any]) -> str | None:
    """The reason a manual compaction job ended without running (its session stayed busy, or is gone): no attempt
    says so. A compaction that ran and failed is shown by its attempt instead."""
    job = event.get("detail") or {}
    error = (job.get("result") or {}).get("error") if isinstance(job.get("result"), dict) else None
    if event.get("kind") != "job.finished" or job.get("kind") != "compaction" or not error or job.get("started_at"):
        return None
    return error.get("message")


RUN_EVENT_PREFIX = "run."  # a simulated run paused, resumed or stopped (sessions_app.fleet)


def run_controls(*, session_id: int, oob: bool = False, notice: str | None = None) -> str:
    """The session page's simulated-run card (state, pause / resume / stop)."""
    context = {"s": {"id": session_id}, "run": ls.simulator_run(session_id=session_id), "oob": oob, "notice": notice}
    return _partial(SESSION_PAGE, "run_controls", context)


def compaction_status(*, session_id: int, notice: str | None = None) -> str:
    """The session page's compaction status (with a stuck session's recoveries) as it is now: the answer to a
    recovery clicked there, so it shows at once; progress follows over the websocket."""
    session = selectors.get_session(session_id=session_id)
    context = {"s": selectors.session_summary(session=session), "attempt": ls.latest_attempt(session_id=session_id),
               "queued": queued_for(session_id=session_id), "progress": None, "oob": False, "notice": notice}
    return _partial(SESSION_PAGE, "compaction_status", context)


def fleet_row(*, session_id: int, notice: str | None = None) -> str:
    """One fleet row as it is now (the answer to a control clicked on the board, so it shows at once)."""
    session = selectors.get_session(session_id=session_id)
    context = {"s": selectors.session_summary(session=session), "attempt": ls.latest_attempt(session_id=session_id),
               "names": names(), "oob": False, "notice": notice}
    return _partial(FLEET_PAGE, "fleet_row", context)


def session_transient(*, session_id: int, event: Mapping[str, Any]) -> str:
    """Progress that is not a rollout line (a compaction attempt in flight, a retry): the compaction status box.
    A run control (pause, resume, stop) re-renders the session's head and its run card instead."""
    if str(event.get("kind", "")).startswith(RUN_EVENT_PREFIX):
        session = selectors.get_session(session_id=session_id)
        summary = selectors.session_summary(session=session)
        after = int(event.get("after_seq") or 0)
        return (marker(seq=after, after_seq=after, kind="transient")
                + _partial(SESSION_PAGE, "session_head", {"s": summary, "seq": summary["last_seq"], "oob": True})
                + run_controls(session_id=session_id, oob=True))
    detail = event.get("detail") or {}
    if event.get("kind") in (GATEWAY_NOTICE, GATEWAY_REQUESTS):  # the gateway card (gateway_app.compaction, recording)
        return gateway_transient(event)
    session = selectors.get_session(session_id=session_id)
    context = {
        "oob": True,
        "attempt": ls.latest_attempt(session_id=session_id),
        "queued": queued_for(session_id=session_id),
        "progress": {"kind": event.get("kind", ""), "detail": detail},
        "expired": _compaction_job_refusal(event),
        # the live numbers too: whether the session is stuck depends on them (compaction_app.engine.stuck)
        "s": selectors.session_summary(session=session),
    }
    after = int(event.get("after_seq") or 0)
    return (marker(seq=after, after_seq=after, kind="transient") + _partial(SESSION_PAGE, "compaction_status", context)
            + live_faults(session=session))


def live_faults(*, session: Session) -> str:
    """The fault panel's list as it is now, out of band, for a session with injected faults ('' without): each
    request the simulator answers may fire one, so its "N left · not fired yet" moves with the session's lines and
    compaction progress instead of holding what the page loaded with."""
    if not session.fault_injection or not faults_apply(session=session):
        return ""
    return _partial(SESSION_PAGE, "fault_active", {"faults": fault_panel(session=session), "oob": True})


GATEWAY_CARD = "gateway_app/partials/gateway_card.html"


def gateway_transient(event: Mapping[str, Any]) -> str:
    """The gateway card's parts an event changes, with the partials of its first render: the request count, the
    card's state list (after a compaction the gateway ran: the request it answered is cleared), the notice and the
    line of exchanges cut (gateway_app.journal)."""
    detail = event.get("detail") or {}
    after = int(event.get("after_seq") or 0)
    parts = [marker(seq=after, after_seq=after, kind="transient")]
    if "requests" in detail:
        parts.append(_partial(GATEWAY_CARD, "gateway_requests", {"requests": int(detail["requests"]), "oob": True}))
    if isinstance(detail.get("state"), dict):
        parts.append(_partial(GATEWAY_CARD, "gateway_state", {**detail["state"], "oob": True}))
    if isinstance(detail.get("cut"), dict):  # an exchange was cut (gateway_app.journal): the card's cut line
        parts.append(_partial(GATEWAY_CARD, "gateway_cut", {**detail["cut"], "oob": True}))
    if event.get("kind") == GATEWAY_NOTICE:
        parts.append(render_to_string("gateway_app/partials/gateway_notice.html",
                                      {"notice": str(detail.get("message") or ""), "oob": True}))
    return "".join(parts)


ALERTS_PARTIAL = "compaction_app/partials/fleet_alerts.html"


def alerts_update(*, session_id: int | None = None) -> str:
    """The open alerts list and its count as out-of-band fragments (the same partials the pages render first):
    the fleet's (session_id None) or one session's. The card's collapsed state is the reader's and is kept."""
    context = {"recent_alerts": recent_alerts(session_id=session_id), "oob": True, "alerts_session": session_id}
    return _partial(ALERTS_PARTIAL, "alerts_count", context) + _partial(ALERTS_PARTIAL, "alerts_list", context)


# --- fleet board ---------------------------------------------------------------------------------------------------


def names() -> dict[str, dict[int, str]]:
    """Provider and policy names by id (small tables; the fleet rows show names, events carry ids)."""
    return {
        "providers": dict(Provider.objects.values_list("id", "name")),
        "policies": dict(CompactionPolicy.objects.values_list("id", "name")),
    }


def fleet_context(*, fleet_filter: FleetFilter, page: FleetPage) -> dict[str, Any]:
    """One page of the board and the whole fleet's counts."""
    summaries = [selectors.session_summary(session=s) for s in ls.fleet_page(fleet_filter=fleet_filter, page=page)]
    counts = ls.fleet_counts(fleet_filter=fleet_filter)
    rows = page.rows if page.rows is not None else tuple(s["id"] for s in summaries)
    return {
        "rows": summaries,
        "attempts": ls.last_attempts(session_ids=[s["id"] for s in summaries]),
        "names": names(),
        "filter": fleet_filter,
        "page": page,
        "counts": counts,
        "page_ids": ",".join(str(i) for i in rows),
        "shown_to": page.offset + len(summaries),
        "has_next": page.offset + len(rows) < counts["matching"],
    }


def fleet_table(*, fleet_filter: FleetFilter, page: FleetPage) -> str:
    """The table body and the counts as out-of-band fragments: the fleet's HTTP re-sync answer (the page's own
    rows, when it names them)."""
    context = {**fleet_context(fleet_filter=fleet_filter, page=page), "oob": True}
    return _partial(FLEET_PAGE, "fleet_rows", context) + _partial(FLEET_PAGE, "fleet_counts", context)


def fleet_counts_of(*, counts: Mapping[str, Any], fleet_filter: FleetFilter) -> str:
    """The header's counts (sessions_app.live.selectors.fleet_counts) as an out-of-band fragment."""
    return _partial(FLEET_PAGE, "fleet_counts", {"counts": counts, "filter": fleet_filter, "oob": True})


def fleet_updates(
    *,
    summaries: Iterable[Mapping[str, Any]],
    attempts: Mapping[int, Mapping[str, Any]],
    names_by_id: Mapping[str, Mapping[int, str]],
    fleet_filter: FleetFilter,
) -> str:
    """One message updating several rows: matching sessions are re-rendered (the same row partial as the page),
    sessions that no longer match the filter are removed."""
    parts = []
    for summary in summaries:
        if fleet_filter.matches(summary):
            parts.append(live_fleet_row(summary=summary, attempt=attempts.get(summary["id"]), names_by_id=names_by_id))
        else:
            parts.append(f'<tr id="session-{int(summary["id"])}" hx-swap-oob="delete" data-live-delete="1"></tr>')
    return "".join(parts)


# Rendered fleet rows by their content. A live row is the same for every viewer (it names no user and carries no
# CSRF token: htmx sends the page's), and every board showing a session re-renders its row on each of its changes,
# so the boards of one process share each rendering instead of making one per board (bench_load --board-watchers:
# 50 boards on 2 pages rendered about 630 rows a second, most of the web processes' CPU). An entry serves for
# ROW_CACHE_SECONDS only, because relative times and stuck timers in a row move with the clock.
row_cache: Lru[bytes, tuple[float, str]] = Lru(ROW_CACHE_SIZE)


def live_fleet_row(
    *,
    summary: Mapping[str, Any],
    attempt: Mapping[str, Any] | None,
    names_by_id: Mapping[str, Mapping[int, str]],
    now: float | None = None,
) -> str:
    """The fleet row partial of `summary` with `attempt` as its last compaction, rendered as an out-of-band swap."""
    now = time.monotonic() if now is None else now
    names = (names_by_id["providers"].get(summary.get("provider")), names_by_id["policies"].get(summary.get("policy")))
    key = orjson.dumps((summary, attempt, names), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    cached = row_cache.get(key)
    if cached is not None and now - cached[0] < ROW_CACHE_SECONDS:
        return cached[1]
    html = _partial(FLEET_PAGE, "fleet_row", {"s": summary, "attempt": attempt, "names": names_by_id, "oob": True})
    row_cache.put(key, (now, html))
    return html
