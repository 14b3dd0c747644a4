"""The session page shows the newest page of the history and older pages on request (issue 27: a 200,000-line
import made a 42 MB page). The live re-render of a replaced history uses the same partial, cut the same way."""

from __future__ import annotations

import re

import pytest

from sessions_app.live import render as live_render
from sessions_app.live.selectors import HISTORY_PAGE_SIZE
from sessions_app.rollout.services import do_append_items


@pytest.fixture
def operator_client(client, operator_user):
    client.force_login(operator_user)
    return client


def _shown(html: str) -> list[int]:
    """The positions of the history items in a fragment, read from their text ("item 17")."""
    return [int(n) for n in re.findall(r"item (\d+)\b", html)]


@pytest.fixture
def long_session(make_session, items_factory):
    return make_session(items=[items_factory.user(f"item {n}") for n in range(450)])


def test_the_session_page_shows_the_newest_page_and_a_control_for_older_items(operator_client, long_session):
    page = operator_client.get(f"/sessions/{long_session.pk}/").content.decode()

    assert _shown(page) == list(range(250, 450))
    assert "250 older items not shown" in page
    assert f'hx-get="/sessions/{long_session.pk}/history/?before=250"' in page


def test_older_pages_come_a_page_at_a_time_until_the_first_item(operator_client, long_session):
    second = operator_client.get(f"/sessions/{long_session.pk}/history/?before=250")
    assert second.status_code == 200
    assert _shown(second.content.decode()) == list(range(50, 250))
    assert "?before=50" in second.content.decode()

    last = operator_client.get(f"/sessions/{long_session.pk}/history/?before=50").content.decode()
    assert _shown(last) == list(range(50))
    assert "older item" not in last


@pytest.mark.parametrize("query", ["", "?before=x", "?before=-1", f"?before={2**63}"])
def test_a_bad_page_request_is_a_400(operator_client, long_session, query):
    assert operator_client.get(f"/sessions/{long_session.pk}/history/{query}").status_code == 400


def test_older_pages_need_the_operator_role(client, make_user, long_session):
    client.force_login(make_user(None))
    assert client.get(f"/sessions/{long_session.pk}/history/?before=250").status_code == 403


def test_the_page_size_does_not_grow_with_the_history(operator_client, make_session, items_factory):
    short = make_session(items=[items_factory.user(f"item {n}") for n in range(HISTORY_PAGE_SIZE)])
    long = make_session(items=[items_factory.user(f"item {n}") for n in range(5 * HISTORY_PAGE_SIZE)])
    short_page = operator_client.get(f"/sessions/{short.pk}/").content
    long_page = operator_client.get(f"/sessions/{long.pk}/").content
    assert len(_shown(long_page.decode())) == HISTORY_PAGE_SIZE
    assert len(long_page) < len(short_page) * 1.2


def test_a_live_update_that_replaces_the_history_shows_its_newest_page(long_session, compact):
    before = long_session.last_seq
    compact(long_session, strategy="local")  # keeps the recent user messages: a replacement of hundreds of items
    html, _ = live_render.session_batch(session_id=long_session.pk, after_seq=before)

    history = html[html.index('id="history"'):]
    history = history[:history.index("</section>")]
    shown = history.count('<li class="item item--')
    long_session.refresh_from_db()
    assert shown == min(long_session.live_item_count, HISTORY_PAGE_SIZE)
    assert long_session.live_item_count > HISTORY_PAGE_SIZE  # the compaction kept more than a page
    assert f"{long_session.live_item_count - HISTORY_PAGE_SIZE} older items not shown" in history


def test_live_appends_still_arrive_one_by_one(long_session, items_factory):
    before = long_session.last_seq
    do_append_items(session=long_session, items=[items_factory.user("item 450")])
    html, _ = live_render.session_batch(session_id=long_session.pk, after_seq=before)
    assert 'hx-swap-oob="beforeend:#history-items"' in html and _shown(html) == [450]
