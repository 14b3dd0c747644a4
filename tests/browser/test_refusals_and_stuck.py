"""Issue 17, round two, in a real browser: a refused form says why inside that form (start simulated sessions,
the rollout import, the rollback confirmation), and a stuck session is marked on its own page, live, with a
one-click recovery answered there."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

LIVE_TIMEOUT = 45_000
BAD_ROLLOUT = Path(__file__).resolve().parents[1] / "fixtures" / "rollouts" / "malformed_bad_json.jsonl"


def wait_live(page: Page) -> None:
    expect(page.locator(".live-dot").first).to_have_attribute("data-state", "open", timeout=15_000)


def message(role: str, text: str) -> dict:
    return {"type": "message", "role": role,
            "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]}


def test_refused_forms_say_why_inside_the_form(login, web):
    page = login("support")
    # start simulated sessions: a window the server refuses (the browser's own check is lifted to reach it)
    page.goto(f"{web.url}/")
    page.click(".start-fleet summary")
    page.locator("form.start-form input[name=context_window]").evaluate("el => { el.removeAttribute('min'); el.removeAttribute('step'); }")
    page.fill("form.start-form input[name=context_window]", "100")
    page.click("form.start-form button[type=submit]")
    expect(page.locator("form.start-form .note--error")).to_contain_text("at least 2,000 tokens")
    expect(page.locator("form.start-form input[name=context_window]")).to_have_value("100")
    expect(page.locator(".flash")).to_have_count(0)

    # the import: a malformed file in strict mode is refused whole, the bad lines listed under its button
    page.goto(f"{web.url}/import/")
    page.set_input_files("form.import-form input[type=file]", str(BAD_ROLLOUT))
    page.check("form.import-form input[name=strict]")
    page.click("form.import-form button[type=submit]")
    expect(page.locator("form.import-form #import-errors")).to_contain_text("Nothing was imported.")
    expect(page.locator("form.import-form #import-errors td").first).to_be_visible()

    # the rollback confirmation: someone else rolled it back meanwhile
    created = web.api("POST", "sessions", body={
        "title": "Rolled back twice", "provider": web.seed["provider"], "policy": web.seed["policy"],
        "items": [message("user", "tidy the logs " * 40), message("assistant", "tidied " * 200)]})
    compaction = web.api("POST", f"sessions/{created['id']}/compact", body={"method": "local"})
    page.goto(f"{web.url}/compactions/{compaction['id']}/rollback/")
    web.api("POST", f"compactions/{compaction['id']}/rollback", role="support", body={"reason": "first"})
    page.fill("form.rollback-form textarea[name=reason]", "the summary lost the plan")
    page.click("form.rollback-form button[type=submit]")
    expect(page.locator("form.rollback-form .note--error")).to_contain_text("already rolled back")
    expect(page.locator("form.rollback-form textarea[name=reason]")).to_have_value("the summary lost the plan")


def test_a_stuck_session_is_marked_on_its_page_live_and_recovered_there(login, web):
    session_id = web.seed["stuck_here_session"]
    page = login("operator")
    page.goto(f"{web.url}/sessions/{session_id}/")
    wait_live(page)
    expect(page.locator("#compaction-status .flag--stuck")).to_have_count(0)
    page.select_option("#compact-form select[name=strategy]", "remote_v1")
    page.click("#compact-form button[type=submit]")
    stuck = page.locator(f'#compaction-status [data-stuck="{session_id}"]')
    expect(stuck).to_be_visible(timeout=LIVE_TIMEOUT)  # arrives with the failure, no reload
    expect(stuck.locator("[data-stuck-reason]")).to_contain_text("context window exceeded")
    expect(stuck.locator("button[data-recover]")).to_have_count(2)
    stuck.locator('button[data-recover="token_budget"]').click()
    expect(page.locator('#compaction-status [data-status="completed"]')).to_be_visible(timeout=LIVE_TIMEOUT)
    expect(page.locator("#compaction-status .flag--stuck")).to_have_count(0)
    expect(page.locator("#compaction-status .refusal")).to_have_count(0)
