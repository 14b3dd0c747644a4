"""The fleet board past a page of sessions in a real browser: the page holds one page of rows whatever the fleet's
size, and its filter and sort hold through live updates (a server of its own, seeded with 60 sessions more, so the
other browser tests keep a board with room)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from sessions_app.fleet.paging import PAGE_SIZE
from tests.browser.conftest import serving

FLEET = 60
LIVE_TIMEOUT = 30_000  # ms


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("browser-fleet-var"), COMPACTWEB_SEED_FLEET=str(FLEET)) as server:
        yield server


def rows(page: Page):
    return page.locator("#fleet-rows tr[id^='session-']")


def shown_ids(page: Page) -> list[int]:
    return page.evaluate("() => [...document.querySelectorAll('#fleet-rows tr[id]')].map(r => +r.id.slice(8))")


def grow(web, session_id: int, tokens: int) -> None:
    """Append a turn whose usage puts the session's window at `tokens` (a live update of its row)."""
    web.api("POST", f"sessions/{session_id}/items", body={
        "items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}],
        "usage": {"input_tokens": tokens - 10, "output_tokens": 10, "total_tokens": tokens},
    })


def test_the_board_holds_one_page_and_keeps_its_filter_and_sort_through_live_updates(login, web):
    page = login("operator")
    page.goto(f"{web.url}/?q=fleet+agent")
    expect(page.locator(".live-dot").first).to_have_attribute("data-state", "open", timeout=15_000)
    expect(page.locator("#fleet-live")).to_have_attribute("data-resyncs", "1", timeout=15_000)  # the open re-sync
    expect(rows(page)).to_have_count(PAGE_SIZE)
    expect(page.locator("#fleet-counts")).to_have_attribute("data-matching", str(FLEET))
    shown = shown_ids(page)
    off_page = sorted(set(web.seed["fleet"]) - set(shown))
    assert len(off_page) == FLEET - PAGE_SIZE

    # A session at the bottom of the page climbs towards its limit: live, it moves to the top (nearest first).
    climber = shown[-1]
    grow(web, climber, 20_000)
    expect(rows(page).first).to_have_attribute("id", f"session-{climber}", timeout=LIVE_TIMEOUT)
    # A session off the page climbs further still, then one on the page a little: the page never takes the first
    # (it joins on a re-rank), and the second settles below the climber.
    grow(web, off_page[0], 25_000)
    second = shown[-2]
    grow(web, second, 10_000)
    expect(rows(page).nth(1)).to_have_attribute("id", f"session-{second}", timeout=LIVE_TIMEOUT)
    expect(rows(page)).to_have_count(PAGE_SIZE)
    assert f"session-{off_page[0]}" not in page.content()
    assert page.input_value("input[name=q]") == "fleet agent" and page.input_value("select[name=sort]") == "limit"
    assert page.url.endswith("/?q=fleet+agent")

    # Ranked anew, the off-page session leads the page (one page still).
    page.click("text=Re-rank")
    expect(rows(page).first).to_have_attribute("id", f"session-{off_page[0]}")
    expect(rows(page)).to_have_count(PAGE_SIZE)
