"""The fleet board's order under the operator's hand (issue 47, item 1): while the pointer or the focus is in the
table, a live update that re-ranks the rows does not move them (a row and its Pause button stay where the operator
aimed) and the page says a new order waits; leaving the table or "Re-sort" applies it."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.test_fleet_paging import grow
from tests.browser.test_operator_controls import LIVE_TIMEOUT, new_session, wait_live


def _ids(page: Page) -> list[int]:
    return page.evaluate("() => [...document.querySelectorAll('#fleet-rows tr[id]')].map(r => +r.id.slice(8))")


def test_the_order_holds_while_the_pointer_or_focus_is_in_the_table_and_re_sorts_on_leaving(login, web):
    ids = [new_session(web, f"triage hold {n}", n=1)["id"] for n in range(3)]
    page = login("operator")
    page.goto(f"{web.url}/?q=triage+hold")
    wait_live(page)
    expect(page.locator("#fleet-live")).to_have_attribute("data-resyncs", "1", timeout=15_000)
    before = _ids(page)
    assert sorted(before) == sorted(ids)
    bottom = before[-1]

    # Pointing at the top row: the bottom session climbs past every other, live, yet nothing moves under the pointer.
    page.hover(f"#session-{before[0]} td.c-title")
    grow(web, bottom, 25_000)
    expect(page.locator(f"#session-{bottom} .meter__value")).to_have_attribute("data-tokens", re.compile(r"^25\d{3}$"),
                                                                                 timeout=LIVE_TIMEOUT)
    expect(page.locator("#fleet-order")).to_have_attribute("data-order", "pending")
    expect(page.locator("#fleet-order [data-order-text]")).to_contain_text("rows have new rankings")
    assert _ids(page) == before

    # The pointer leaves the table: the new order applies.
    page.mouse.move(5, 5)
    expect(page.locator("#fleet-rows tr").first).to_have_attribute("id", f"session-{bottom}")
    expect(page.locator("#fleet-order")).to_have_attribute("data-order", "live")

    # Focus in the table holds it too (a keyboard user on a link); "Re-sort" applies it at once.
    ranked = _ids(page)
    page.focus(f"#session-{ranked[-1]} td.c-title a")
    grow(web, ranked[-1], 30_000)
    expect(page.locator(f"#session-{ranked[-1]} .meter__value")).to_have_attribute("data-tokens", re.compile(r"^30\d{3}$"),
                                                                                     timeout=LIVE_TIMEOUT)
    expect(page.locator("#fleet-order")).to_have_attribute("data-order", "pending")
    assert _ids(page) == ranked
    expect(page.locator(f"#session-{ranked[-1]} td.c-title a")).to_be_focused()  # the live row kept the focus
    page.evaluate("() => document.getElementById('fleet-resort').click()")  # a click that leaves the focus in place
    expect(page.locator("#fleet-rows tr").first).to_have_attribute("id", f"session-{ranked[-1]}")
