"""Issue 47 items 2, 6 and 7 in a real browser against Daphne: the fault panel's count moves over the websocket as
the fault fires (it kept "1 left · not fired yet"), and the inspector shows the operator's extra instructions, the
prompt's text and words, not codes, with the one date format. Each test saves a screenshot."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.test_operator_controls import new_session, wait_live


def test_the_fault_panel_moves_live_as_the_fault_fires(login, web, screenshot_dir):
    created = new_session(web, "Fault fires live")
    page = login("operator")
    page.goto(f"{web.url}/sessions/{created['id']}/")
    wait_live(page)
    page.select_option("#fault-form select[name=fault]", "overloaded")
    page.fill("#fault-form input[name=times]", "1")
    page.click("#fault-form button[type=submit]")
    panel = page.locator("#fault-active")
    expect(panel).to_contain_text("1 left · not fired yet")
    # the one overloaded answer is absorbed by a retry; the page is not reloaded
    web.api("POST", f"sessions/{created['id']}/compact", body={"strategy": "local"})
    expect(panel).to_contain_text("0 left · fired 1 time", timeout=15_000)
    expect(panel).not_to_contain_text("not fired yet")
    # The panel is swapped in again at every live event, so it is never "stable" for a scroll: a full-page shot
    page.screenshot(path=str(screenshot_dir / "fault-fired-live.png"), full_page=True)


def test_the_inspector_shows_what_the_model_was_asked_in_words(login, web, screenshot_dir):
    created = new_session(web, "Asked with instructions")
    compaction = web.api("POST", f"sessions/{created['id']}/compact",
                         body={"strategy": "local", "instructions": "Keep the <failing> test names."})
    assert compaction["extra_instructions"] == "Keep the <failing> test names."
    page = login("operator")
    page.goto(f"{web.url}/compactions/{compaction['id']}/")
    expect(page.locator("#extra-instructions")).to_have_text("Keep the <failing> test names.")
    page.click("#prompt-text-link")
    page.locator("#prompt-text summary").click()
    expect(page.locator("#prompt-text pre")).to_contain_text("CONTEXT CHECKPOINT COMPACTION")
    head = page.locator(".inspector-head")
    expect(head).to_contain_text("standalone turn")
    expect(head).to_contain_text("not injected (a new window starts without it)")
    expect(head).not_to_contain_text("standalone_turn")
    expect(head).not_to_contain_text("§")
    page.screenshot(path=str(screenshot_dir / "inspector-asked.png"), full_page=True)
    page.goto(f"{web.url}/sessions/{created['id']}/")
    stamps = page.locator("#timeline time")
    expect(stamps.first).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
