"""An on-call operator on a phone, 390 x 844 (issue 47, item 3): the menu folds behind one button, a session is found
with the title filter, its meter and its Pause / Stop are on the screen (nothing clipped, nothing wider than the
phone), and its page compacts it."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.test_operator_controls import LIVE_TIMEOUT, wait_live

PHONE = {"width": 390, "height": 844}


def _fits(page: Page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_on_a_phone_an_operator_finds_a_session_sees_its_meter_pauses_stops_and_compacts_it(
    login, web, screenshot_dir
):
    (run,) = web.api("POST", "fleet", body={"scenario": "many-short-turns", "count": 1,
                                            "provider": web.seed["provider"], "policy": web.seed["policy"],
                                            "turns_per_minute": 30, "loop": True})["runs"]
    session_id = run["session"]
    page = login("operator")
    page.set_viewport_size(PHONE)
    page.goto(f"{web.url}/")
    wait_live(page)
    _fits(page)

    # The menu is folded: its links are hidden until "Menu" opens it, and it fits the phone when open.
    nav = page.locator("#site-menu nav a", has_text="Alerts")
    expect(nav).to_be_hidden()
    page.click(".nav-toggle")
    expect(page.locator(".nav-toggle")).to_have_attribute("aria-expanded", "true")
    expect(nav).to_be_in_viewport(ratio=1)
    _fits(page)
    page.screenshot(path=str(screenshot_dir / "phone-menu.png"))
    page.click(".nav-toggle")
    expect(nav).to_be_hidden()

    # Find it by its title, see its meter and its controls wholly on the screen.
    page.fill("input[name=q]", run["title"])
    page.locator("#fleet-live").scroll_into_view_if_needed()
    page.locator(".filters button[type=submit]").click()
    row = page.locator(f"#session-{session_id}")
    expect(row).to_be_visible()
    _fits(page)
    # Scrolled in one script run: a live re-render may replace the row between a locator's resolution and its action.
    page.evaluate("sel => document.querySelector(sel).scrollIntoView({block: 'center'})", f"#session-{session_id}")
    expect(row.locator(".meter")).to_be_in_viewport(ratio=1)
    pause = row.locator("button", has_text="Pause")
    expect(pause).to_be_in_viewport(ratio=1)
    expect(row.locator("button", has_text="Stop")).to_be_in_viewport(ratio=1)
    page.screenshot(path=str(screenshot_dir / "phone-fleet.png"), full_page=True)
    pause.click()
    expect(row.locator(".state").first).to_have_text("paused", timeout=5_000)
    stop = row.locator("button", has_text="Stop")
    expect(stop).to_be_in_viewport(ratio=1)
    stop.click()
    expect(row.locator(".state").first).to_have_text("stopped", timeout=5_000)

    # Its page: the meter and Compact now on the phone, and the compaction runs.
    # Pressed rather than tapped: the row's notice may go with a live update and move the link under a tap.
    row.locator("td.c-title a").press("Enter")
    page.wait_for_url(f"**/sessions/{session_id}/")
    wait_live(page)
    _fits(page)
    expect(page.locator("#session-head .meter")).to_be_visible()
    compact = page.locator("#compact-form button[type=submit]")
    compact.scroll_into_view_if_needed()
    expect(compact).to_be_in_viewport(ratio=1)
    compact.click()
    expect(page.locator('#compaction-status [data-status="completed"]')).to_be_visible(timeout=LIVE_TIMEOUT)
    _fits(page)
    page.screenshot(path=str(screenshot_dir / "phone-session.png"), full_page=True)
