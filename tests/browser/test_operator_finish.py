"""The finish of the operator UI in a real browser: styled error pages with the navigation, the start-fleet popover
inside a 1280 px window, the audit table and the admin policy list, the active nav item, the favicon, the demo's
example hook, and an accessibility check (axe-core, vendored in tests/browser/vendor/) of every page."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"


def checked_page(browser, web, role: str | None, *, viewport: dict | None = None,
                 color_scheme: str = "light") -> Page:
    """A page of its own browser context, logged in as `role`, that may inject axe-core: the site's CSP refuses
    inline scripts (as it should), so this context bypasses CSP for the checker only. 1280 x 800 in the light
    scheme unless told (`color_scheme="dark"` emulates the browser's dark preference)."""
    page = browser.new_context(viewport=viewport or {"width": 1280, "height": 800}, bypass_csp=True,
                               color_scheme=color_scheme).new_page()
    if role:
        user = web.user(role)
        page.goto(f"{web.url}/login/")
        page.fill("#id_username", user["username"])
        page.fill("#id_password", user["password"])
        page.click("button[type=submit]")
        page.wait_for_load_state()
    return page


def axe_violations(page: Page) -> list:
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        "axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']}).then(r => r.violations.map("
        "v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))"
    )


def narrow(page: Page) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})


def test_an_unknown_page_is_the_styled_404_with_the_navigation(login, web):
    page = login("operator")
    page.goto(f"{web.url}/sessions/999999/")
    expect(page.locator(".error-page h1")).to_have_text("Nothing here")
    expect(page.locator(".nav a", has_text="Fleet")).to_be_visible()
    assert page.evaluate("getComputedStyle(document.querySelector('.error-page')).backgroundColor") == "rgb(255, 255, 255)"


def test_a_refused_role_sees_the_styled_403_that_says_why(login, web):
    page = login("none")
    page.goto(f"{web.url}/analytics/")
    expect(page.locator(".error-page [data-reason]")).to_contain_text("needs the operator role")
    expect(page.locator(".topbar .brand")).to_be_visible()


def test_the_start_fleet_popover_fits_a_1280_px_window(login, web):
    page = login("operator")
    narrow(page)
    page.click("text=Start simulated sessions")
    form = page.locator(".start-form")
    expect(form).to_be_visible()
    outside = page.evaluate("""() => {
        const box = document.querySelector('.start-form').getBoundingClientRect();
        const bad = [];
        if (box.left < 0 || box.right > window.innerWidth) bad.push('form');
        for (const el of document.querySelectorAll('.start-form select, .start-form input:not([type=hidden]), .start-form button')) {
            const r = el.getBoundingClientRect();
            if (r.left < box.left - 0.5 || r.right > box.right + 0.5) bad.push(el.name || el.tagName);
        }
        return bad;
    }""")
    assert outside == []


def test_the_audit_table_is_styled_like_the_other_tables(login, web):
    page = login("support")
    page.goto(f"{web.url}/audit/")
    head = page.locator("#audit-table thead th").first
    assert head.evaluate("el => getComputedStyle(el).textTransform") == "uppercase"
    assert head.evaluate("el => getComputedStyle(el).paddingLeft") != "0px"
    assert head.evaluate("el => getComputedStyle(el).textAlign") in ("left", "start")


def test_the_admin_policy_list_does_not_overflow_and_shows_the_example_hook(login, web):
    page = login("admin")
    narrow(page)
    page.goto(f"{web.url}/admin/compaction_app/compactionpolicy/")
    overflow = page.evaluate("(() => { const r = document.querySelector('#changelist .results');"
                             " return r.scrollWidth - r.clientWidth; })()")
    assert overflow <= 0
    page.goto(f"{web.url}/admin/compaction_app/hook/")
    row = page.locator("#result_list tr", has_text="example: log each compaction")
    expect(row).to_be_visible()
    row.locator("a").first.click()
    expect(page.locator("#id_enabled")).not_to_be_checked()  # seeded disabled
    page.goto(f"{web.url}/admin/compaction_app/prompt/")
    expect(page.locator("#result_list")).to_contain_text("example: keep file paths")


def test_the_nav_marks_the_section_of_every_page(login, web):
    page = login("support")
    page.goto(f"{web.url}/analytics/")
    expect(page.locator('.nav a[aria-current="page"]')).to_have_text("Analytics")
    page.goto(f"{web.url}/sessions/{web.seed['slow_session']}/")
    expect(page.locator('.nav a[aria-current="page"]')).to_have_text("Fleet")
    page.goto(f"{web.url}/audit/")
    expect(page.locator('.nav a[aria-current="page"]')).to_have_text("Audit log")


def test_the_favicon_is_served(page: Page, web):
    page.goto(f"{web.url}/login/")
    href = page.locator('link[rel="icon"]').get_attribute("href")
    assert page.request.get(web.url + href).status == 200
    assert page.request.get(web.url + "/favicon.ico").status == 200


@pytest.mark.parametrize("path", ["/", "/analytics/", "/import/", "/audit/", "/sessions/{slow}/", "/nowhere/"])
def test_every_page_passes_the_accessibility_check(browser, web, path):
    page = checked_page(browser, web, "support")
    page.goto(web.url + path.format(slow=web.seed["slow_session"]))
    page.wait_for_load_state()
    assert axe_violations(page) == []


def test_the_login_page_passes_the_accessibility_check(browser, web):
    page = checked_page(browser, web, None)
    page.goto(f"{web.url}/login/")
    assert axe_violations(page) == []
