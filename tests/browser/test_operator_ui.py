"""The operator UI in a real browser: logins per role, a fleet whose meters move while the simulator runs, a session
page that updates live, a manual compaction whose progress and result appear without a reload, the inspector's
before/after and rollback visibility, an anonymous websocket refused, transcript text rendered as text.

Screenshots of the fleet board, a session view and the inspector go to artifacts/screenshots/ (untracked), or to
the folder COMPACTWEB_SCREENSHOTS names (docs/screenshots to refresh the README's).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

SCRIPT = "<script>alert(1)</script>"
LIVE_TIMEOUT = 45_000  # ms: simulated turns and compactions on a busy 2-core CI machine


def mark_no_reload(page: Page) -> None:
    page.evaluate("window.__sameDocument = true")


def assert_no_reload(page: Page) -> None:
    assert page.evaluate("window.__sameDocument === true"), "the page reloaded"


def wait_until(page: Page, predicate: str, *, arg=None, timeout: float) -> None:
    """Poll `predicate` (a JS function) with page.evaluate until it is true: Playwright's wait_for_function
    evaluates strings with eval, which the site's CSP (script-src 'self') rightly refuses."""
    for _ in range(int(timeout / 250)):
        if page.evaluate(predicate, arg):
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"still false after {timeout / 1000:.0f} s: {predicate}")


def wait_live(page: Page) -> None:
    expect(page.locator(".live-dot").first).to_have_attribute("data-state", "open", timeout=15_000)


def message(role: str, text: str) -> dict:
    return {"type": "message", "role": role,
            "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]}


@pytest.mark.parametrize(("role", "sees_admin"), [("operator", False), ("support", False), ("admin", True)])
def test_each_role_logs_in_and_sees_the_fleet(login, role, sees_admin):
    page = login(role)
    expect(page.locator("h1")).to_have_text("Fleet")
    expect(page.locator(".topbar .role")).to_have_text(role)
    expect(page.locator(".nav a", has_text="Admin")).to_have_count(1 if sees_admin else 0)


def test_a_user_without_a_role_is_refused(login):
    page = login("none")
    assert "403" in page.title() or page.locator("text=Forbidden").count() or "403" in page.content()


def test_an_anonymous_websocket_is_refused(page: Page, web):
    page.goto(f"{web.url}/login/")
    code = page.evaluate(
        """url => new Promise(resolve => {
               const ws = new WebSocket(url);
               ws.onclose = e => resolve(e.code);
           })""",
        web.url.replace("http", "ws") + "/ws/fleet/",
    )
    assert code == 4401


def test_fleet_meters_move_while_the_simulator_runs(login, web, screenshot_dir):
    page = login("operator")
    wait_live(page)
    rows_before = page.locator("#fleet-rows tr[id]").count()
    page.click("text=Start simulated sessions")
    page.select_option("select[name=scenario]", "many-short-turns")
    page.fill("input[name=count]", "3")
    page.select_option(".start-form select[name=provider]", str(web.seed["provider"]))
    page.fill("input[name=turns_per_minute]", "1200")
    page.fill("input[name=context_window]", "6000")  # small, so auto compactions come within seconds
    page.check("input[name=loop]")
    mark_no_reload(page)
    page.click(".start-form button[type=submit]")
    # the answer is the form with its notice; the new rows arrive over the board's websocket
    expect(page.locator(".start-form .note--ok")).to_contain_text("Started 3")
    page.click(".start-fleet summary")  # close the popover again
    expect(page.locator("#fleet-rows tr[id]")).to_have_count(rows_before + 3, timeout=LIVE_TIMEOUT)
    before = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#fleet-rows tr[id]')].map("
        "r => [r.id, r.querySelector('.meter__value').dataset.tokens]))"
    )
    wait_until(page, """before => [...document.querySelectorAll('#fleet-rows tr[id]')].some(
               r => before[r.id] !== undefined && r.querySelector('.meter__value').dataset.tokens !== before[r.id])""",
               arg=before, timeout=LIVE_TIMEOUT)
    # Keep watching until a session has compacted, so the board shows a last compaction and its outcome.
    wait_until(page, "() => document.querySelectorAll('#fleet-rows .outcome--completed').length > 0",
               timeout=LIVE_TIMEOUT * 2)
    assert_no_reload(page)
    page.screenshot(path=str(screenshot_dir / "fleet.png"))


def test_a_session_page_appends_items_live_and_renders_a_script_as_text(login, web):
    created = web.api("POST", "sessions", body={
        "title": "Live append", "provider": web.seed["provider"], "policy": web.seed["policy"],
        "items": [message("user", "first request")],
    })
    page = login("operator")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{web.url}/sessions/{created['id']}/")
    wait_live(page)
    mark_no_reload(page)
    web.api("POST", f"sessions/{created['id']}/items", body={"items": [message("user", SCRIPT)]})
    item = page.locator("#history-items .item--user").last
    expect(item).to_contain_text(SCRIPT, timeout=15_000)  # shown as literal text
    assert page.locator("#history-items script").count() == 0 and dialogs == []
    expect(page.locator("#live-seq")).to_have_attribute(
        "data-seq", str(web.api("GET", f"sessions/{created['id']}")["last_seq"]))
    assert_no_reload(page)


def test_a_seq_gap_makes_the_page_resync_over_http(login, web):
    created = web.api("POST", "sessions", body={
        "title": "Gap", "provider": web.seed["provider"], "policy": web.seed["policy"],
        "items": [message("user", "before the gap")],
    })
    page = login("operator")
    page.goto(f"{web.url}/sessions/{created['id']}/")
    wait_live(page)
    mark_no_reload(page)
    # Pretend the page missed a message: its seq is now behind what the next batch starts from.
    page.evaluate("document.getElementById('live-seq').dataset.seq = '0'")
    web.api("POST", f"sessions/{created['id']}/items", body={"items": [message("user", "after the gap")]})
    expect(page.locator("#history-items")).to_contain_text("after the gap", timeout=15_000)
    assert page.locator("#session-live").get_attribute("data-resyncs") is not None
    assert page.locator("#history-items .item--user").count() == 2  # re-synced, not duplicated
    assert_no_reload(page)


def test_a_manual_compaction_shows_progress_then_the_result_without_a_reload(login, web):
    page = login("operator")
    page.goto(f"{web.url}/sessions/{web.seed['slow_session']}/")
    wait_live(page)
    mark_no_reload(page)
    page.select_option("#compact-form select[name=strategy]", "local")
    page.fill("#compact-form textarea[name=instructions]", "keep the regression test name")
    page.click("#compact-form button[type=submit]")
    expect(page.locator("#compact-form .note--ok")).to_contain_text("started")
    expect(page.locator('#compaction-status [data-status="running"]')).to_be_visible(timeout=15_000)
    expect(page.locator("#compaction-status")).to_contain_text("Compacting")
    done = page.locator('#compaction-status [data-status="completed"]')
    expect(done).to_be_visible(timeout=LIVE_TIMEOUT)
    expect(done).to_contain_text("→")
    expect(page.locator("#history-items .item--summary")).to_have_count(1)
    expect(page.locator("#timeline")).to_contain_text("Window #1")
    assert_no_reload(page)


def test_the_inspector_shows_before_and_after_and_rollback_only_to_support(login, web, screenshot_dir):
    page = login("operator")
    page.goto(f"{web.url}/sessions/{web.seed['slow_session']}/")
    link = page.locator("#compaction-status a", has_text="inspect")
    expect(link).to_be_visible(timeout=LIVE_TIMEOUT)
    inspector = link.get_attribute("href")
    page.goto(f"{web.url}{inspector}")
    expect(page.locator("#before .item").first).to_be_visible()
    expect(page.locator("#after .item--summary")).to_have_count(1)
    expect(page.locator("#before .mark--left").first).to_be_visible()
    expect(page.locator("#rollback-button")).to_have_count(0)
    support = login("support", fresh=True)
    support.goto(f"{web.url}{inspector}")
    expect(support.locator("#rollback-button")).to_be_visible()


def test_screenshots_of_a_busy_session_and_its_inspector(login, web, screenshot_dir):
    page = login("operator")
    page.goto(web.url + "/?q=Many")
    row = page.locator("#fleet-rows tr", has=page.locator(".outcome--completed")).first
    expect(row).to_be_visible(timeout=LIVE_TIMEOUT * 2)
    session_href = row.locator(".c-title a").get_attribute("href")
    page.goto(web.url + session_href)
    wait_live(page)
    expect(page.locator(".chart__drop").first).to_be_attached()
    # Each auto compaction fired over the limit of the window it closed: its drop starts at or above that
    # window's limit line (the segment that ends at, or runs past, the drop), not below it.
    drops = page.evaluate("[...document.querySelectorAll('.chart__drop')].map(d => [+d.getAttribute('x1'), "
                          "+d.getAttribute('y1')])")
    limits = page.evaluate("[...document.querySelectorAll('.chart__limit')].map(l => [+l.getAttribute('x1'), "
                           "+l.getAttribute('x2'), +l.getAttribute('y1')])")
    assert drops and limits
    for x, y in drops:
        (limit_y,) = [ly for x1, x2, ly in limits if x1 < x <= x2]
        assert y <= limit_y + 0.5
    page.screenshot(path=str(screenshot_dir / "session.png"))
    inspector = page.locator("#timeline a", has_text=re.compile("compaction #")).first.get_attribute("href")
    page.goto(web.url + inspector)
    expect(page.locator("#after .item").first).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "inspector.png"))
