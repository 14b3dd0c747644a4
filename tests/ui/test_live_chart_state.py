"""The token chart a live batch renders comes from the process's chart state, extended with the batch's own lines;
it must equal a full re-read of the rollout (`token_points`, `chart_for`) after every batch, and fall back to that
read whenever the state does not cover the batch's start."""

from __future__ import annotations

import re

import pytest

from compaction_app.models import Compaction, Provider
from sessions_app.live import render as live_render
from sessions_app.live import selectors as ls
from sessions_app.live.token_chart import Point, chart_geometry
from sessions_app.models import Session
from sessions_app.rollout import projection as p
from sessions_app.rollout import selectors
from sessions_app.rollout.services import NewLine, append_rollout_lines, estimate_line, usage_line

CHART = re.compile(r'<section id="token-chart".*?</section>', flags=re.S)


@pytest.fixture(autouse=True)
def _fresh_caches(no_engine_sleeps):
    live_render.batch_cache._entries.clear()
    live_render.chart_cache.clear()
    yield
    live_render.batch_cache._entries.clear()
    live_render.chart_cache.clear()


class Turns:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.n = 0

    def lines(self, total: int | None = None) -> list[NewLine]:
        self.n += 1
        n = self.n
        return [
            NewLine("response_item", {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": f"turn {n}"}]}),
            NewLine("response_item", {"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": f"done {n}"}]}),
            usage_line(usage={"total_tokens": 1_000 + 37 * n if total is None else total}),
        ]

    def append(self, lines: list[NewLine] | None = None) -> None:
        append_rollout_lines(session=self.session, lines=lines or self.lines(), publish=False)
        self.session.refresh_from_db()


def full_read_chart(session: Session, *, limit: int | None = None) -> str:
    """The chart section as the page's first load renders it (`chart_for`): every reading read again (the newest
    `limit` when given, as `chart_for` would with that many places)."""
    session = selectors.get_session(session_id=session.pk)
    summary = selectors.session_summary(session=session)
    points = ls.token_points(session=session, limit=limit) if limit is not None else None
    chart = live_render.chart_for(session=session, summary=summary) if limit is None else chart_geometry(
        points, context_window=summary["context_window"], limit=summary["auto_compact_limit"],
        window_limits=ls.window_limits(session_id=session.pk, points=points))
    context = {"s": summary, "session": session, "seq": session.last_seq, "oob": True, "progress": None,
               "chart": chart}
    return live_render._partial(live_render.SESSION_PAGE, "chart", context)


def batch(session: Session, after_seq: int) -> str:
    html, upto = live_render.session_batch(session_id=session.pk, after_seq=after_seq)
    assert upto == Session.objects.get(pk=session.pk).last_seq
    return html


def chart_of(html: str) -> str:
    (chart,) = CHART.findall(html)
    return chart


def assert_equals_full_read(session: Session, html: str, *, limit: int = ls.CHART_POINTS) -> None:
    session.refresh_from_db()
    state = live_render.chart_cache.get(str(session.thread_id))
    assert state is not None and state.seq == session.last_seq
    assert state.chart_points() == ls.token_points(session=session, limit=limit)
    assert chart_of(html) == chart_of(full_read_chart(session, limit=limit))


class _Selectors:
    """The live selectors as render.py sees them, with `chart_readings` replaced (the tests' own full reads, through
    `token_points`, still read)."""

    def __init__(self, chart_readings) -> None:
        self.chart_readings = chart_readings

    def __getattr__(self, name: str):
        return getattr(ls, name)


@pytest.fixture
def no_full_read(monkeypatch):
    """From its call on, fails the test if a batch reads the chart's readings again instead of extending the state."""

    def forbid(**kwargs):
        raise AssertionError("the chart was read in full")

    def apply():
        monkeypatch.setattr(live_render, "ls", _Selectors(forbid))

    return apply


@pytest.fixture
def full_reads(monkeypatch) -> list[int]:
    """The upto_seq of every full read of the chart's readings a batch makes."""
    calls: list[int] = []

    def spy(**kwargs):
        calls.append(kwargs.get("upto_seq"))
        return ls.chart_readings(**kwargs)

    monkeypatch.setattr(live_render, "ls", _Selectors(spy))
    return calls


@pytest.mark.django_db
def test_batches_in_a_row_extend_the_chart_without_reading_it_again_and_equal_a_full_read(
    make_session, no_full_read
):
    turns = Turns(make_session())
    for _ in range(5):
        turns.append()
    before = turns.session.last_seq
    turns.append()
    assert_equals_full_read(turns.session, batch(turns.session, before))  # the first batch reads the chart
    no_full_read()
    for _ in range(4):
        before = turns.session.last_seq
        turns.append()
        turns.append()  # two turns in one batch
        assert_equals_full_read(turns.session, batch(turns.session, before))


@pytest.mark.django_db
def test_a_compaction_a_rollback_and_a_redo_in_a_batch_add_their_drops_as_a_full_read_does(make_session, no_full_read):
    from sessions_app.compactions.rollback import do_redo_compaction, do_rollback_compaction
    from sessions_app.compactions.services import do_compact_session

    turns = Turns(make_session())
    for _ in range(3):
        turns.append()
    batch(turns.session, 0)
    no_full_read()

    before = turns.session.last_seq
    do_compact_session(session_id=turns.session.pk, strategy="local")
    turns.append()
    html = batch(turns.session, before)
    assert_equals_full_read(turns.session, html)
    compaction = Compaction.objects.get(session=turns.session)
    (drop,) = [pt for pt in ls.token_points(session=turns.session) if pt.drop]
    assert drop.seq == compaction.rollout_seq and drop.peak == compaction.tokens_before

    for undo in (do_rollback_compaction, do_redo_compaction):  # a redo needs the history the rollback left
        before = Session.objects.get(pk=turns.session.pk).last_seq
        undo(compaction_id=compaction.pk)
        turns.session.refresh_from_db()
        assert_equals_full_read(turns.session, batch(turns.session, before))
    before = turns.session.last_seq
    turns.append()
    assert_equals_full_read(turns.session, batch(turns.session, before))
    assert sum(pt.drop for pt in ls.token_points(session=turns.session)) == 3


@pytest.mark.django_db
def test_a_batch_that_does_not_start_where_the_state_ends_reads_the_chart_in_full(make_session, full_reads):
    turns = Turns(make_session())
    turns.append()
    batch(turns.session, 0)
    assert full_reads == [turns.session.last_seq]
    turns.append()
    gap_start = turns.session.last_seq  # a page that missed the turn before: its batch starts after the state
    turns.append()
    assert_equals_full_read(turns.session, batch(turns.session, gap_start))
    assert full_reads[-1] == turns.session.last_seq and len(full_reads) == 2
    before = turns.session.last_seq
    turns.append()
    assert_equals_full_read(turns.session, batch(turns.session, before))
    assert len(full_reads) == 2  # extended again from the state the full read left


@pytest.mark.django_db
def test_an_older_batch_rendered_last_neither_moves_the_state_back_nor_changes_its_chart(make_session, full_reads):
    turns = Turns(make_session())
    turns.append()
    first = turns.session.last_seq
    turns.append()
    newest = batch(turns.session, 0)
    lagging = batch(turns.session, first)  # covered by the state (at the newest seq): extended by nothing
    assert chart_of(lagging) == chart_of(newest) and len(full_reads) == 1
    live_render.batch_cache._entries.clear()
    html, upto = live_render.session_batch(session_id=turns.session.pk, after_seq=0, upto_seq=first)
    assert upto == first and len(full_reads) == 2  # an older range: read in full, up to its own seq only
    assert ls.token_points(session=turns.session, upto_seq=first) == [Point(seq=first, tokens=1_037)]
    assert live_render.chart_cache.get(str(turns.session.thread_id)).seq == turns.session.last_seq


@pytest.mark.django_db
def test_a_batch_without_a_reading_moves_the_state_on_so_the_next_one_is_extended(make_session, no_full_read):
    turns = Turns(make_session())
    turns.append()
    batch(turns.session, 0)
    no_full_read()
    lines = turns.lines()
    before = turns.session.last_seq
    turns.append(lines[:2])  # the turn's items: no usage yet, no chart in the batch
    assert 'id="token-chart"' not in batch(turns.session, before)
    before = turns.session.last_seq
    turns.append(lines[2:])
    assert_equals_full_read(turns.session, batch(turns.session, before))


@pytest.mark.django_db
def test_the_chart_keeps_the_newest_readings_with_readings_without_a_point_taking_a_place(
    make_session, monkeypatch, no_full_read
):
    monkeypatch.setattr(ls, "CHART_POINTS", 5)
    turns = Turns(make_session())
    for _ in range(4):
        turns.append()
    batch(turns.session, 0)
    no_full_read()
    for lines in ([estimate_line()], turns.lines(), turns.lines(total=0), turns.lines(), turns.lines()):
        before = turns.session.last_seq
        turns.append(lines)
        assert_equals_full_read(turns.session, batch(turns.session, before), limit=5)
    state = live_render.chart_cache.get(str(turns.session.thread_id))
    assert len(state.readings) == 5 and len(state.chart_points()) == 4  # the 0 total: no point, but a place
    assert [pt.seq for pt in state.chart_points()] == [r.seq for r in state.readings if r.tokens]


@pytest.mark.django_db
def test_a_new_window_and_new_base_instructions_render_as_a_full_read_does(make_session, no_full_read):
    from sessions_app.compactions.services import do_compact_session

    turns = Turns(make_session())
    for _ in range(3):
        turns.append()
    do_compact_session(session_id=turns.session.pk, strategy="local")  # a drop
    turns.session.refresh_from_db()
    turns.append()
    batch(turns.session, 0)
    no_full_read()
    # A new window opens, the provider's window (the chart's axis) and the base instructions' tokens (every drop's
    # value) change.
    Provider.objects.filter(pk=turns.session.provider_id).update(context_window=64_000)
    Session.objects.filter(pk=turns.session.pk).update(meter_base_tokens=turns.session.meter_base_tokens + 1_234)
    before = turns.session.last_seq
    turns.append([NewLine(p.WINDOW_OPENED, {}), *turns.lines()])
    html = batch(turns.session, before)
    assert_equals_full_read(turns.session, html)
    assert turns.session.window_number == 2 and 'id="token-chart"' in html
