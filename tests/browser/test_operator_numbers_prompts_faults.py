"""Issue 33 items 2, 3 and 4 in a real browser: one compaction shows the same window tokens on the session page, the
fleet board and the inspector, with the chart drawing each window's own limit; the inspector names the prompt a
local summary used; the fault panel says what an injected fault does in words. Each test saves a screenshot."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.test_operator_controls import new_session, wait_live


def test_one_compaction_shows_the_same_window_tokens_on_every_page(login, web, screenshot_dir):
    created = new_session(web, "Same numbers everywhere")
    compaction = web.api("POST", f"sessions/{created['id']}/compact", body={"strategy": "local"})
    before, after = compaction["tokens_before"], compaction["tokens_after"]
    assert compaction["tokens_freed"] == before - after
    page = login("operator")
    page.goto(f"{web.url}/compactions/{compaction['id']}/")
    expect(page.locator("#tokens-before")).to_have_text(f"{before:,}")
    expect(page.locator("#tokens-after")).to_have_text(f"{after:,}")
    expect(page.locator("#tokens-freed")).to_contain_text(f"{before - after:,}")
    expect(page.locator("#prompt-used")).to_contain_text("default (Codex's SUMMARIZATION_PROMPT)")
    page.screenshot(path=str(screenshot_dir / "inspector-numbers-and-prompt.png"), full_page=True)
    page.goto(f"{web.url}/sessions/{created['id']}/")
    wait_live(page)
    figures = f'[data-window-tokens="{before}:{after}"]'
    expect(page.locator(f"#compaction-status {figures}")).to_have_text(f"{before:,} → {after:,}")
    expect(page.locator(f"#timeline {figures}")).to_be_visible()
    expect(page.locator("#token-chart line.chart__limit").first).to_be_attached()
    page.screenshot(path=str(screenshot_dir / "session-numbers.png"), full_page=True)
    page.goto(f"{web.url}/?q=Same+numbers")
    brief = page.locator(f"#fleet-rows {figures}")
    expect(brief).to_be_visible()
    assert brief.get_attribute("title").startswith(f"{before:,} → {after:,} window tokens.")  # the exact figures
    page.screenshot(path=str(screenshot_dir / "fleet-numbers.png"))


def test_an_injected_fault_is_described_in_words(login, web, screenshot_dir):
    created = new_session(web, "Fault in words")
    page = login("operator")
    page.goto(f"{web.url}/sessions/{created['id']}/")
    wait_live(page)
    page.select_option("#fault-form select[name=fault]", "server_error")
    page.fill("#fault-form input[name=times]", "3")
    page.click("#fault-form button[type=submit]")
    panel = page.locator("#fault-active")
    expect(panel).to_contain_text("Server error: answers HTTP 500 (internal server error) instead of a reply.")
    expect(panel).to_contain_text("Hits its turns and its compactions alike")
    expect(panel).to_contain_text("3 left · not fired yet")
    expect(panel).not_to_contain_text("key=")
    page.locator("#fault-form").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "fault-in-words.png"))
