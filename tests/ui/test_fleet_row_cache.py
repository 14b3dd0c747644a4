"""A live fleet row is rendered once per content and shared by every board of the process for ROW_CACHE_SECONDS:
the same row as an uncached render, a new rendering as soon as anything in it changes, and none served stale
past its lifetime."""

from __future__ import annotations

import pytest

from sessions_app.live import render as live_render
from sessions_app.live import selectors as ls
from sessions_app.rollout import selectors
from sessions_app.rollout.services import NewLine, append_rollout_lines


@pytest.fixture(autouse=True)
def _fresh_row_cache():
    live_render.row_cache._entries.clear()
    yield
    live_render.row_cache._entries.clear()


@pytest.fixture
def renders(monkeypatch):
    """Counts the renderings of the fleet row partial (the real rendering still runs)."""
    calls: list[int] = []
    real = live_render._partial

    def counting(template, name, context):
        if name == "fleet_row":
            calls.append(context["s"]["id"])
        return real(template, name, context)

    monkeypatch.setattr(live_render, "_partial", counting)
    return calls


def row_args(session):
    session.refresh_from_db()
    return {"summary": selectors.session_summary(session=session),
            "attempt": ls.latest_attempt(session_id=session.pk), "names_by_id": live_render.names()}


def test_boards_asking_for_the_same_row_share_one_rendering(session, renders):
    args = row_args(session)
    first = live_render.live_fleet_row(**args, now=100.0)
    again = [live_render.live_fleet_row(**row_args(session), now=100.5) for _ in range(3)]
    assert again == [first] * 3
    assert renders == [session.pk]


def test_the_shared_row_is_the_row_an_uncached_render_gives(session):
    args = row_args(session)
    expected = live_render._partial(live_render.FLEET_PAGE, "fleet_row", {
        "s": args["summary"], "attempt": args["attempt"], "names": args["names_by_id"], "oob": True})
    assert live_render.live_fleet_row(**args) == expected
    assert live_render.live_fleet_row(**args) == expected
    assert f'id="session-{session.pk}"' in expected and 'hx-swap-oob="true"' in expected


def test_a_row_whose_session_changed_is_rendered_again(session, items_factory, renders):
    before = live_render.live_fleet_row(**row_args(session), now=100.0)
    append_rollout_lines(session=session, lines=[NewLine("response_item", items_factory.user("one more"))], publish=False)
    after = live_render.live_fleet_row(**row_args(session), now=100.1)
    assert renders == [session.pk, session.pk]
    assert f'data-seq="{session.last_seq}"' in after and after != before


def test_a_rendering_older_than_its_lifetime_is_not_served(session, renders):
    args = row_args(session)
    live_render.live_fleet_row(**args, now=100.0)
    live_render.live_fleet_row(**args, now=100.0 + live_render.ROW_CACHE_SECONDS)
    assert renders == [session.pk, session.pk]


def test_a_renamed_provider_renders_the_row_again(session, renders):
    args = row_args(session)
    live_render.live_fleet_row(**args, now=100.0)
    renamed = {**args["names_by_id"], "providers": {**args["names_by_id"]["providers"], session.provider_id: "renamed"}}
    html = live_render.live_fleet_row(**{**args, "names_by_id": renamed}, now=100.1)
    assert renders == [session.pk, session.pk]
    assert "renamed" in html
