"""What an operator must always be able to reach and trust at 1280 x 800: a stuck session's recoveries and run
controls inside the page (the fleet card clips what overflows it), and a "Compact now" notice that goes once the
compaction it announced has ended, instead of contradicting the result shown below it."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.test_operator_controls import LIVE_TIMEOUT, new_session, wait_live

WIDTH, HEIGHT = 1280, 800


def _make_stuck(page: Page, web, session_id: int) -> None:
    page.goto(f"{web.url}/sessions/{session_id}/")
    wait_live(page)
    page.select_option("#compact-form select[name=strategy]", "remote_v1")
    page.click("#compact-form button[type=submit]")
    expect(page.locator(f'#compaction-status [data-stuck="{session_id}"]')).to_be_visible(timeout=LIVE_TIMEOUT)


def test_a_stuck_sessions_recoveries_stay_inside_the_page_and_the_fleet_card_at_1280_px(login, web, screenshot_dir):
    session_id = web.seed["stuck_narrow_session"]
    page = login("operator")
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    _make_stuck(page, web, session_id)

    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    recoveries = page.locator(f'#compaction-status [data-stuck="{session_id}"] button[data-recover]')
    expect(recoveries).to_have_count(2)
    # The status card is below the fold at 800 px. Scrolled in one script run: a live re-render of the card may
    # replace the buttons between a locator's resolution and its action, and the scroll position outlives it.
    page.evaluate(
        "sel => document.querySelector(sel).scrollIntoView({block: 'center'})",
        f'#compaction-status [data-stuck="{session_id}"]',
    )
    for i in range(2):
        # Wholly in the viewport: IntersectionObserver counts what an ancestor's overflow clips as hidden.
        expect(recoveries.nth(i)).to_be_in_viewport(ratio=1)

    page.goto(f"{web.url}/?q=Stuck+at+1280")
    row = page.locator(f"#session-{session_id}")
    expect(row.locator(".flag--stuck")).to_be_visible()
    buttons = row.locator(".c-actions button")
    expect(buttons).to_have_count(2)
    for i in range(2):
        expect(buttons.nth(i)).to_be_in_viewport(ratio=1)  # the fleet card's overflow: hidden clipped them
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    page.screenshot(path=str(screenshot_dir / "fleet-stuck-1280.png"))


def test_a_compact_now_notice_goes_once_its_compaction_has_ended(login, web):
    session_id = web.seed["notice_session"]
    page = login("operator")
    page.goto(f"{web.url}/sessions/{session_id}/")
    wait_live(page)
    page.click("#compact-form button[type=submit]")
    note = page.locator("#compact-form [data-until-idle]")
    expect(note).to_contain_text("Compaction started")  # the model answers after 2 s: the note is seen first
    expect(page.locator('#compaction-status [data-status="completed"]')).to_be_visible(timeout=LIVE_TIMEOUT)
    expect(note).to_have_count(0)


def test_a_refusal_stays_while_nothing_has_run_since(login, web):
    session_id = web.seed["notice_session"]
    page = login("operator")
    page.goto(f"{web.url}/sessions/{session_id}/")
    wait_live(page)
    page.select_option("#compact-form select[name=strategy]", "token_budget")
    page.fill("#compact-form textarea[name=instructions]", "keep the test names")
    page.click("#compact-form button[type=submit]")
    refusal = page.locator("#compact-form .note--error")
    expect(refusal).to_contain_text("local summarisation only")
    # A live update of the same (finished) status does not take the refusal away.
    page.evaluate("htmx.trigger(document.body, 'htmx:oobAfterSwap')")
    expect(refusal).to_be_visible()


def test_replay_is_linked_from_the_session_and_the_inspector_and_its_table_aligns_values_under_headers(login, web):
    created = new_session(web, "Replay me", n=3)
    compaction_id = web.api("POST", f"sessions/{created['id']}/compact", body={"strategy": "local"})["id"]
    page = login("operator")
    page.goto(f"{web.url}/compactions/{compaction_id}/")
    expect(page.locator("#replay-link")).to_have_attribute("href", f"/sessions/{created['id']}/replays/")
    page.goto(f"{web.url}/sessions/{created['id']}/")
    page.click("#replay-link")
    expect(page.locator("#replay-form")).to_be_visible()
    page.click("#replay-form button[type=submit]")
    table = page.locator(".replay-table").first
    expect(table).to_be_visible(timeout=LIVE_TIMEOUT)
    headers = table.locator("thead th")
    first_row = table.locator("tbody tr").nth(1)  # Compactions: a number under each header
    for col in (1, 2, 3):
        head, cell = headers.nth(col).bounding_box(), first_row.locator("th, td").nth(col).bounding_box()
        assert abs(head["x"] - cell["x"]) < 1 and abs(head["width"] - cell["width"]) < 1, (col, head, cell)
