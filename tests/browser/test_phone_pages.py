"""The on-call operator's other pages on a phone, 390 x 844 (issue 47, item 3 and the "Phone" goal): the alerts page,
a gateway session, the gateway keys page with a route's set-up, the inspector, analytics and the audit log are no
wider than the screen, and an alert's buttons are on it; and an age on a page left open moves on (item 2). A server
of its own seeded with alerts and a gateway session (COMPACTWEB_SEED_A11Y, the accessibility sweep's seed), so the
other browser tests keep their quiet board. tests/browser/test_phone.py has the fleet board, the menu and a
session's controls."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import serving
from tests.browser.test_operator_finish import checked_page

PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("browser-phone-var"), COMPACTWEB_SEED_A11Y="1") as server:
        yield server


def width_of(page: Page) -> int:
    """The document's width: wider than the phone means the page scrolls sideways (or is clipped)."""
    return page.evaluate("document.documentElement.scrollWidth")


def test_on_a_phone_every_page_an_operator_opens_is_no_wider_than_the_screen(browser, web, screenshot_dir):
    seed = web.seed["a11y"]
    page = checked_page(browser, web, "operator", viewport=PHONE)
    paths = {
        "fleet": "/",
        "alerts": "/alerts/?state=all",
        "session-with-alerts": f"/sessions/{seed['summarised_session']}/",
        "gateway-session": f"/sessions/{seed['gateway_session']}/",
        "gateway-keys": "/gateway-keys/",
        "inspector": f"/compactions/{seed['long_compaction']}/",
        "analytics": "/analytics/",
        "audit-log": "/audit/",
    }
    wider = {}
    for name, path in paths.items():
        page.goto(f"{web.url}{path}")
        page.wait_for_load_state()
        if width_of(page) > PHONE["width"]:
            wider[name] = width_of(page)
        # A table wider than the phone scrolls in its own box, which the keyboard reaches (it takes focus).
        unreachable = page.evaluate("[...document.querySelectorAll('main table')].filter("
                                    "t => t.scrollWidth > t.clientWidth + 1 && t.tabIndex < 0).length")
        assert unreachable == 0, f"{name}: {unreachable} table(s) scroll sideways out of the keyboard's reach"
        page.screenshot(path=str(screenshot_dir / f"phone-{name}.png"), full_page=True)  # after: it resizes the page
    assert wider == {}, f"wider than the phone's {PHONE['width']} px: {wider}"
    page.context.close()


def test_on_a_phone_an_alert_is_acknowledged_from_its_buttons_on_the_screen(browser, web):
    page = checked_page(browser, web, "operator", viewport=PHONE)
    page.goto(f"{web.url}/alerts/")
    row = page.locator("#alerts-table tr[data-alert]").first
    acknowledge = row.locator("button", has_text="Acknowledge")
    acknowledge.scroll_into_view_if_needed()
    for name in ("Acknowledge", "Snooze 1 h", "Silence"):
        expect(row.locator("button", has_text=name)).to_be_in_viewport(ratio=1)
    # ... reached by scrolling down only: a table wider than the phone would have been scrolled sideways to them.
    assert page.evaluate("scrollX") == 0
    alert = row.get_attribute("data-alert")
    acknowledge.click()
    # Acknowledged, it leaves the open alerts the page lists.
    expect(page.locator(f'#alerts-table tr[data-alert="{alert}"]')).to_have_count(0)
    page.context.close()


def test_on_a_phone_an_admin_lets_a_route_take_user_keys_and_the_keys_page_shows_its_set_up_on_the_screen(
    browser, web, screenshot_dir
):
    route = web.seed["a11y"]["route"]
    admin = checked_page(browser, web, "admin", viewport=PHONE)
    admin.goto(f"{web.url}/admin/gateway_app/gatewayroute/{route}/change/")
    assert width_of(admin) <= PHONE["width"]
    admin.check("#id_allow_user_keys")
    admin.locator("input[name=_continue]").click()
    admin.wait_for_load_state()
    expect(admin.locator(".messagelist")).to_contain_text("changed successfully")
    assert width_of(admin) <= PHONE["width"]
    admin.context.close()

    page = checked_page(browser, web, "operator", viewport=PHONE)
    page.goto(f"{web.url}/gateway-keys/")
    config = page.locator(".codex-config").first
    expect(config).to_be_visible()
    copy = config.locator("button", has_text="Copy").first
    copy.scroll_into_view_if_needed()
    expect(copy).to_be_in_viewport(ratio=1)
    page.screenshot(path=str(screenshot_dir / "phone-gateway-keys-set-up.png"), full_page=True)
    assert width_of(page) <= PHONE["width"]
    page.context.close()


def test_an_age_on_a_page_left_open_moves_on_without_a_reload(browser, web):
    # Ages are live counters (issue 47: live or absent): "just now" must not stay "just now" for an hour.
    page = checked_page(browser, web, "operator")
    page.clock.install()
    page.goto(f"{web.url}/alerts/?state=all")
    age = page.locator("#alerts-table time[data-age]").first
    assert int(age.get_attribute("data-age")) < 3600  # seeded when this module's server started
    before = age.inner_text()
    page.clock.fast_forward("03:00:00")
    expect(age).to_have_text("3 h ago")
    assert before != "3 h ago"
    page.context.close()
