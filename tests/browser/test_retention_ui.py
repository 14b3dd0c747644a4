"""Issue 18 in a real browser: pin from the session page, compact with observation masking from the compact-now form,
the inspector says what the compaction forgot (per category, the forgotten facts, the cost), the fleet board shows
the last compaction's score and an alert set up in the admin, analytics shows retention by strategy."""

from __future__ import annotations

import json

from playwright.sync_api import expect

LIVE_TIMEOUT = 45_000


def message(role: str, text: str) -> dict:
    return {"type": "message", "role": role,
            "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]}


def tool_session(web, title: str) -> int:
    items = [message("user", "Fix tests/billing/test_split.py; money must stay Decimal")]
    for n in range(3):
        items += [
            {"type": "function_call", "call_id": f"c{n}", "name": "shell",
             "arguments": json.dumps({"command": ["bash", "-lc", f"pytest -q tests/test_{n}.py"]})},
            {"type": "function_call_output", "call_id": f"c{n}",
             "output": f"Exit code: {n % 2}\nOutput:\n" + "FAILED tests/test_x.py::test_y AssertionError\n" * 40},
            message("user", f"next step {n}"),
        ]
    body = {"title": title, "provider": web.seed["provider"], "policy": web.seed["policy"], "items": items}
    return web.api("POST", "sessions", body=body)["id"]


def test_pin_mask_and_read_what_the_compaction_forgot(login, web, screenshot_dir):
    session_id = tool_session(web, "Masking demo")
    page = login("support")  # a pin becomes developer text: support role (sessions_app.web.instructing)
    page.goto(f"{web.url}/sessions/{session_id}/")
    page.select_option("#pin-form select[name=kind]", "constraint")
    page.fill("#pin-form input[name=text]", "Money is always Decimal, never float")
    page.click("#pin-form button[type=submit]")
    expect(page.locator("#pin-list")).to_contain_text("Money is always Decimal")

    page.select_option("#compact-form select[name=strategy]", "masking")
    page.click("#compact-form button[type=submit]")
    link = page.locator("#compaction-status a", has_text="inspect")
    expect(link).to_be_visible(timeout=LIVE_TIMEOUT)
    page.goto(f"{web.url}{link.get_attribute('href')}")
    card = page.locator("#retention")
    expect(card.locator("#retention-categories")).to_contain_text("Artifact trail")
    expect(card.locator("#forgotten-facts")).to_contain_text("forgot: exit 0 of pytest -q tests/test_0.py")
    expect(page.locator("#compaction-cost")).to_contain_text("Compaction call")
    expect(page.locator("#after")).to_contain_text("pinned_context")
    page.screenshot(path=str(screenshot_dir / "retention.png"), full_page=False)

    page.goto(f"{web.url}/?q=Masking")
    expect(page.locator("#fleet-rows .retention-badge").first).to_contain_text("kept")
    page.goto(f"{web.url}/analytics/")
    expect(page.locator('#retention-rollup table[data-by="method"]')).to_contain_text("masking")


def test_an_admin_sets_a_storm_threshold_and_the_fleet_board_links_the_storm(login, web):
    admin = login("admin")
    admin.goto(f"{web.url}/admin/compaction_app/alertsettings/")
    admin.fill("input[name=storm_count]", "1")
    admin.click("input[name=_save]")
    expect(admin.locator(".messagelist")).to_contain_text("changed successfully")

    session_id = tool_session(web, "Storm demo")
    first = web.api("POST", f"sessions/{session_id}/compact", body={"strategy": "token_budget"})
    second = web.api("POST", f"sessions/{session_id}/compact", body={"strategy": "token_budget"})
    page = login("operator", fresh=True)
    page.goto(f"{web.url}/")
    alerts = page.locator("#fleet-alerts")
    expect(alerts).to_contain_text("compaction storm")
    expect(alerts.locator(f'a[href="/compactions/{second["id"]}/"]')).to_have_count(1)
    alerts.locator(f'a[href="/compactions/{first["id"]}/"]').first.click()
    expect(page.locator("#retention")).to_be_visible()
