"""Accessibility of every page state an operator meets (issue 33 item 7), in a real browser with axe-core: no
serious and no critical WCAG 2 A/AA violation with alerts present (fleet, session page, alerts page), local
summaries (session page, inspector), stuck sessions, an injected fault blamed for a failure, refusals (409 / 400
notices), import errors, the policy form, gateway pages, login and error pages; and the keyboard: skip links first,
the fleet's first run control a few Tabs from the top. A server of its own, seeded with those states
(COMPACTWEB_SEED_A11Y), so the other browser tests keep their quiet board. Each test saves a screenshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import serving
from tests.browser.test_operator_finish import axe_violations, checked_page

BAD_ROLLOUT = Path(__file__).resolve().parents[1] / "fixtures" / "rollouts" / "malformed_bad_json.jsonl"
BLOCKING = ("serious", "critical")
LIVE_TIMEOUT = 30_000


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("browser-a11y-var"), COMPACTWEB_SEED_A11Y="1") as server:
        yield server


def blocking(page: Page) -> list:
    """The serious and critical violations of the page as it is now (id, impact, first nodes)."""
    return [v for v in axe_violations(page) if v["impact"] in BLOCKING]


def check(page: Page, screenshot_dir: Path, name: str) -> None:
    page.screenshot(path=str(screenshot_dir / f"a11y-{name}.png"), full_page=True)
    found = blocking(page)
    assert found == [], f"{name}: {found}"


STATES = {
    "fleet-with-alerts-and-stuck": "/",
    "session-with-alerts-and-local-summary": "/sessions/{summarised_session}/",
    "session-stuck-with-fault": "/sessions/{stuck_seeded}/",
    "inspector-local-summary": "/compactions/{local_compaction}/",
    "rollback-confirm": "/compactions/{local_compaction}/rollback/",
    "replay-compare": "/sessions/{summarised_session}/replays/",
    "alerts-page": "/alerts/",
    "analytics": "/analytics/",
    "audit-log": "/audit/",
    "import": "/import/",
    "not-found": "/nowhere/",
}


@pytest.mark.parametrize("name", list(STATES))
def test_each_seeded_page_state_has_no_serious_or_critical_violation(browser, web, screenshot_dir, name):
    page = checked_page(browser, web, "admin")
    page.goto(web.url + STATES[name].format(**web.seed["a11y"]))
    page.wait_for_load_state()
    if name == "fleet-with-alerts-and-stuck":
        expect(page.locator("#fleet-alerts")).to_contain_text("failure streak")
        expect(page.locator(".flag--stuck").first).to_be_visible()
    if name == "session-stuck-with-fault":
        expect(page.locator("#fault-active")).to_contain_text("Server error")
    if name == "session-with-alerts-and-local-summary":
        expect(page.locator("#compaction-status")).to_be_visible()
    check(page, screenshot_dir, name)


def test_the_forbidden_page_and_the_login_page(browser, web, screenshot_dir):
    page = checked_page(browser, web, "none")
    page.goto(f"{web.url}/analytics/")
    expect(page.locator(".error-page [data-reason]")).to_be_visible()
    check(page, screenshot_dir, "forbidden")
    login = checked_page(browser, web, None)
    login.goto(f"{web.url}/login/")
    login.fill("#id_username", "nobody")
    login.fill("#id_password", "wrong")
    login.click("button[type=submit]")
    login.wait_for_load_state()
    check(login, screenshot_dir, "login-refused")


def test_the_policy_form_and_the_admin_lists(browser, web, screenshot_dir):
    page = checked_page(browser, web, "admin")
    page.goto(f"{web.url}/admin/compaction_app/compactionpolicy/{web.seed['policy']}/change/")
    expect(page.locator("#id_compact_prompt_helptext")).to_contain_text("Used by:")
    check(page, screenshot_dir, "policy-form")
    page.goto(f"{web.url}/admin/compaction_app/prompt/")
    check(page, screenshot_dir, "prompt-list")


def test_refusal_notices_and_import_errors(browser, web, screenshot_dir):
    page = checked_page(browser, web, "admin")
    seed = web.seed["a11y"]
    # A 400 refusal beside the form: extra instructions with a method that sends no prompt.
    page.goto(f"{web.url}/sessions/{seed['summarised_session']}/")
    page.select_option("#compact-form select[name=strategy]", "token_budget")
    page.fill("#compact-form [name=instructions]", "keep the file names")
    page.click("#compact-form button[type=submit]")
    expect(page.locator("#compact-form .note--error, #compact-form .refusal").first).to_be_visible(
        timeout=LIVE_TIMEOUT)
    check(page, screenshot_dir, "refusal-400")
    # A 409: a recovery of a session whose run is not paused... or a run control refused (stopping twice).
    page.goto(f"{web.url}/sessions/{seed['run_session']}/")
    page.locator("#run-controls button", has_text="Stop").click()
    expect(page.locator("#run-controls [data-run-status]")).to_have_text("stopped", timeout=LIVE_TIMEOUT)
    answer = page.request.post(f"{web.url}/sessions/{seed['run_session']}/run/resume/",
                               headers={"HX-Request": "true", "X-CSRFToken": csrf(page)})
    assert answer.status == 409
    check(page, screenshot_dir, "after-409")
    # Import errors listed under the form.
    page.goto(f"{web.url}/import/")
    page.set_input_files("form.import-form input[type=file]", str(BAD_ROLLOUT))
    page.check("form.import-form input[name=strict]")
    page.click("form.import-form button[type=submit]")
    expect(page.locator("form.import-form #import-errors")).to_contain_text("Nothing was imported.")
    check(page, screenshot_dir, "import-errors")


def csrf(page: Page) -> str:
    return page.evaluate("() => JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken']")


def focused(page: Page) -> str:
    return page.evaluate("() => { const e = document.activeElement; return (e.textContent || '').trim() + '|' + "
                         "e.tagName; }")


def test_skip_links_come_first_and_the_first_run_control_is_a_few_tabs_away(login, web, screenshot_dir):
    page = login("operator")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{web.url}/")
    expect(page.locator("#fleet-rows form[data-run-control] button").first).to_be_visible(timeout=LIVE_TIMEOUT)
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to content|A"
    expect(page.locator(".skip-link", has_text="Skip to content")).to_be_in_viewport()  # shown once focused
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to the sessions|A"
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to the first run control|A"
    page.keyboard.press("Enter")
    assert focused(page) in ("Pause|BUTTON", "Resume|BUTTON", "Stop|BUTTON")
    page.screenshot(path=str(screenshot_dir / "keyboard-first-run-control.png"))
    # "Skip to the sessions" lands on the table: the next Tab is the first row's first control, in row order.
    page.goto(f"{web.url}/")
    expect(page.locator("#live-status")).to_have_attribute("data-state", "open", timeout=LIVE_TIMEOUT)
    for _ in range(2):
        page.keyboard.press("Tab")
    assert focused(page) == "Skip to the sessions|A"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "fleet-table"
    page.keyboard.press("Tab")
    first_row_link = page.locator("#fleet-rows tr").first.locator("a").first.inner_text()
    assert focused(page) == f"{first_row_link}|A"


def test_every_control_of_the_session_page_is_reachable_by_tab_in_reading_order(login, web, screenshot_dir):
    page = login("operator")
    page.goto(f"{web.url}/sessions/{web.seed['a11y']['stuck_seeded']}/")
    page.keyboard.press("Tab")
    assert focused(page) == "Skip to content|A"
    page.keyboard.press("Enter")
    seen = []
    for _ in range(80):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("() => { const e = document.activeElement; const r = e.getBoundingClientRect();"
                                  " return [e.tagName, e.getAttribute('data-recover') || e.name || e.id || "
                                  "(e.textContent || '').trim().slice(0, 30), r.top + window.scrollY]; }"))
    names = [name for _, name, _ in seen]
    for control in ("local", "token_budget", "strategy", "fault"):
        assert control in names, (control, names)
    # The recoveries come before the fault form, as on the page.
    assert names.index("local") < names.index("fault")
    page.screenshot(path=str(screenshot_dir / "keyboard-session-page.png"))
