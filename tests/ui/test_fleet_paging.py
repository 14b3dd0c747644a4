"""The fleet board a page at a time: ranked nearest the auto-compact limit first (the database's rank equals the
meter's), filtered, paginated, with the whole fleet's counts, and live only for the rows the page holds."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async

from compaction_app.models import CompactionPolicy, Provider
from sessions_app.fleet.filter import FleetFilter
from sessions_app.fleet.paging import NEWEST, PAGE_SIZE, FleetPage, fill
from sessions_app.live import selectors as ls
from sessions_app.models import Session
from sessions_app.rollout import selectors
from tests.ui.test_live_consumers import append, connected, text_of
from tests.ui.test_live_pages import login

ROW = re.compile(r'<tr id="session-(\d+)"')


def _with_tokens(session: Session, tokens: int) -> Session:
    Session.objects.filter(pk=session.pk).update(meter_usage_total=tokens)
    return Session.objects.select_related("provider", "policy").get(pk=session.pk)


@pytest.mark.django_db
def test_paging_parses_malformed_values_as_the_first_page_in_the_default_order():
    page = FleetPage.from_query({"sort": "bogus", "page": "-3", "rows": "4,x,4,0,5"})
    assert page == FleetPage(rows=(4, 5)) and page.offset == 0
    assert FleetPage.from_query({"page": "3", "sort": NEWEST}).offset == 2 * PAGE_SIZE
    assert len(FleetPage.from_query({"rows": ",".join(str(i) for i in range(1, 500))}).rows) == PAGE_SIZE


@pytest.mark.django_db
def test_the_database_ranks_the_fill_as_the_meter_computes_it(make_session, provider):
    """Every limit rule (a configured limit, one above 90% of the window, the body-after-prefix scope, none) ranks
    the sessions in the order of `fill` over their summaries, the order the browser keeps."""
    policies = [
        CompactionPolicy.objects.create(name="default"),
        CompactionPolicy.objects.create(name="low", auto_compact_token_limit=10_000),
        CompactionPolicy.objects.create(name="above", auto_compact_token_limit=90_000),
        CompactionPolicy.objects.create(name="body", auto_compact_token_limit=50_000,
                                        auto_compact_scope=CompactionPolicy.Scope.BODY_AFTER_PREFIX),
    ]
    wide = Provider.objects.create(name="wide", base_url=Provider.EMBEDDED, model="sim-1", context_window=128_000)
    summaries = []
    for n, tokens in enumerate([1_000, 9_000, 27_000, 31_000, 45_000, 60_000, 0, 12_345]):
        session = make_session(title=f"s{n}", policy=policies[n % 4], provider=wide if n % 3 == 0 else provider)
        summaries.append(selectors.session_summary(session=_with_tokens(session, tokens)))
    ranked = [s.pk for s in ls.fleet_page(fleet_filter=FleetFilter(), page=FleetPage())]
    expected = [s["id"] for s in sorted(summaries, key=lambda s: (-fill(s), -s["id"]))]
    assert ranked == expected
    fills = [fill(s) for s in summaries]
    assert len(set(fills)) == len(fills)  # the order is decided by the fill, not by the tie-break


@pytest.mark.django_db
def test_a_page_holds_at_most_a_page_of_rows_and_the_header_counts_the_whole_fleet(operator_user, make_session):
    sessions = [_with_tokens(make_session(title=f"agent {n}"), 100 * n) for n in range(PAGE_SIZE + 7)]
    Session.objects.filter(pk__in=[s.pk for s in sessions[:5]]).update(state="running")
    client = login(operator_user)

    body = client.get("/").content.decode()
    shown = [int(i) for i in ROW.findall(body)]
    # the running ones first (they can still compact), then the fullest of the finished ones
    assert len(shown) == PAGE_SIZE and shown[:6] == [s.pk for s in reversed(sessions[:5])] + [sessions[-1].pk]
    assert 'data-total="57"' in body and '<span data-state-count="running">5 running</span>' in body
    assert 'rel="next" href="?page=2"' in body

    second = [int(i) for i in ROW.findall(client.get("/?page=2").content.decode())]
    assert len(second) == 7 and not set(second) & set(shown)

    running = client.get("/?state=running&sort=newest").content.decode()
    assert [int(i) for i in ROW.findall(running)] == [s.pk for s in reversed(sessions[:5])]
    assert 'data-matching="5"' in running and 'rel="next"' not in running
    assert f"rows={'%2C'.join(str(s.pk) for s in reversed(sessions[:5]))}" in running  # the live connection's rows


@pytest.mark.django_db
def test_the_resync_renders_the_rows_the_page_holds_that_still_match(operator_user, make_session):
    one, two, three = (make_session(title=t) for t in ("one", "two", "three"))
    Session.objects.filter(pk=two.pk).update(state="running")
    body = login(operator_user).get(f"/fleet/rows/?state=idle&rows={one.pk},{two.pk}").content.decode()
    assert [int(i) for i in ROW.findall(body)] == [one.pk]  # not three (not on the page), not two (left the filter)


@pytest.mark.django_db
def test_the_kind_filter_keeps_the_sessions_of_one_source(operator_user, make_session):
    make_session(title="made here")
    Session.objects.filter(pk=make_session(title="from codex").pk).update(source="imported")
    body = login(operator_user).get("/?kind=imported").content.decode()
    assert "from codex" in body and "made here" not in body
    assert '<option value="imported" selected>' in body


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_event_of_a_session_off_the_page_sends_no_row(ws_for, operator_user, make_session, items_factory):
    make = database_sync_to_async(make_session)
    on_page, elsewhere = await make(title="on the page"), await make(title="elsewhere")
    comm = await ws_for(operator_user, f"/ws/fleet/?rows={on_page.pk}")
    await connected(comm)

    await append(elsewhere, items_factory.user("not shown"))
    html = await text_of(comm)
    assert not ROW.search(html) and 'id="fleet-counts"' in html  # the counts only (its state was not yet known)
    await append(elsewhere, items_factory.user("still not shown"))
    await append(on_page, items_factory.user("shown"))
    html = await text_of(comm)
    assert ROW.findall(html) == [str(on_page.pk)]
    assert await comm.receive_nothing(0.5)
    await comm.disconnect()


@pytest.fixture
def row_events(monkeypatch):
    """[(the board's rows when it connected, session id)] for every row event the hub hands to a board."""
    from sessions_app.live.consumers import FleetConsumer

    seen, handle = [], FleetConsumer.row_event

    def spy(self, session_id, event, summary):
        seen.append((self.scope["query_string"].decode(), session_id))
        return handle(self, session_id, event, summary)

    monkeypatch.setattr(FleetConsumer, "row_event", spy)
    return seen


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_boards_of_a_process_share_one_fleet_member_and_each_receives_only_its_rows_events(
    ws_for, operator_user, make_session, items_factory, row_events, monkeypatch
):
    from channels.layers import get_channel_layer

    from sessions_app.rollout.events import FLEET_GROUP

    make = database_sync_to_async(make_session)
    one, two = await make(title="one"), await make(title="two")
    layer, joins = get_channel_layer(), []
    group_add = layer.group_add
    monkeypatch.setattr(layer, "group_add", lambda group, channel: joins.append(group) or group_add(group, channel))
    boards = {}
    for session in (one, two):
        boards[session.pk] = await ws_for(operator_user, f"/ws/fleet/?rows={session.pk}")
        await connected(boards[session.pk])

    await append(one, items_factory.user("a change"))
    assert ROW.findall(await text_of(boards[one.pk])) == [str(one.pk)]
    html = await text_of(boards[two.pk])
    assert not ROW.search(html) and 'id="fleet-counts"' in html  # the counts only (a state not seen before)
    await append(two, items_factory.user("a change"))
    assert ROW.findall(await text_of(boards[two.pk])) == [str(two.pk)]

    assert joins.count(FLEET_GROUP) == 1  # one member for both boards, not one each
    assert sorted(row_events) == [(f"rows={one.pk}", one.pk), (f"rows={two.pk}", two.pk)]
    for board in boards.values():
        await board.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_session_created_after_the_connect_enters_the_last_page_only(
    ws_for, operator_user, make_session, items_factory, row_events
):
    make = database_sync_to_async(make_session)
    old = await make(title="old")
    last = await ws_for(operator_user, "/ws/fleet/")  # the fleet's one page, with room
    await connected(last)
    full_rows = ",".join(str(i) for i in [old.pk, *range(old.pk + 10_000, old.pk + 10_000 + PAGE_SIZE - 1)])
    full = await ws_for(operator_user, f"/ws/fleet/?rows={full_rows}")  # a page without room
    await connected(full)
    other_filter = await ws_for(operator_user, "/ws/fleet/?q=nothing-like-it")
    await connected(other_filter)

    new = await make(title="new")
    await append(new, items_factory.user("first step"))
    assert ROW.findall(await text_of(last)) == [str(new.pk)]
    await append(new, items_factory.user("second step"))  # followed from now on
    assert ROW.findall(await text_of(last)) == [str(new.pk)]

    assert {board for board, session_id in row_events if session_id == new.pk} == {""}  # the last page's only
    for board in (full, other_filter):
        html = await text_of(board)  # the header counts (a new session), never its row
        assert not ROW.search(html) and 'id="fleet-counts"' in html
    for board in (last, full, other_filter):
        await board.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_row_that_left_the_filter_no_longer_reaches_the_board(
    ws_for, operator_user, session, items_factory, row_events
):
    board = await ws_for(operator_user, f"/ws/fleet/?state=running&rows={session.pk}")  # the page showed it running
    await connected(board)
    await append(session, items_factory.user("an idle session changes"))
    assert f'<tr id="session-{session.pk}" hx-swap-oob="delete"' in await text_of(board)

    await append(session, items_factory.user("and changes again"))

    assert await board.receive_nothing(0.5)
    assert len(row_events) == 1
    await board.disconnect()
