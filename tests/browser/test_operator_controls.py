"""The operator's controls in a real browser: refusals shown where the user clicked, a manual compaction queued
behind a running turn (queued → running → done), pause / resume / stop on the session page and at once on the fleet
board, fault injection per session, redo from the inspector, a stuck session recovered in one click, and the
numbers (plain labels, labelled totals, summary tokens, the history count following live appends)."""

from __future__ import annotations

import threading

from playwright.sync_api import Page, expect

LIVE_TIMEOUT = 45_000


def wait_live(page: Page) -> None:
    expect(page.locator(".live-dot").first).to_have_attribute("data-state", "open", timeout=15_000)


def message(role: str, text: str) -> dict:
    return {"type": "message", "role": role,
            "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]}


def new_session(web, title: str, n: int = 2) -> dict:
    items = []
    for i in range(n):
        items += [message("user", f"step {i}: " + "look at the failing build " * 30),
                  message("assistant", f"done {i}: " + "the build passes now " * 120)]
    return web.api("POST", "sessions", body={"title": title, "provider": web.seed["provider"],
                                             "policy": web.seed["policy"], "items": items})


def test_a_refused_compaction_says_why_in_the_form(login, web):
    page = login("operator")
    page.goto(f"{web.url}/sessions/{web.seed['slow_session']}/")
    page.select_option("#compact-form select[name=strategy]", "token_budget")
    page.fill("#compact-form textarea[name=instructions]", "keep the test names")
    page.click("#compact-form button[type=submit]")
    expect(page.locator("#compact-form .note--error")).to_contain_text("local summarisation only")


def test_a_compaction_asked_for_during_a_turn_is_queued_then_runs_then_shows_the_result(login, web):
    session_id = web.seed["busy_session"]
    page = login("operator")
    page.goto(f"{web.url}/sessions/{session_id}/")
    wait_live(page)
    before = page.locator("#history-items .item").count()
    turn = threading.Thread(target=web.api, args=("POST", f"sessions/{session_id}/turns"),
                            kwargs={"body": {"input": "and now the docs"}})
    turn.start()
    try:
        # The turn has started once its user message is in the history; its model request takes 3 s.
        expect(page.locator("#history-items .item")).to_have_count(before + 1, timeout=15_000)
        page.select_option("#compact-form select[name=strategy]", "local")
        page.click("#compact-form button[type=submit]")
        expect(page.locator("#compact-form .note--ok")).to_contain_text("Queued behind the running turn")
        expect(page.locator('#compaction-status [data-status="queued"]')).to_be_visible()
        expect(page.locator('#compaction-status [data-status="running"]')).to_be_visible(timeout=LIVE_TIMEOUT)
        expect(page.locator('#compaction-status [data-status="completed"]')).to_be_visible(timeout=LIVE_TIMEOUT)
    finally:
        turn.join(60)
    expect(page.locator("#history-items .item--summary")).to_have_count(1)


def test_pause_on_the_fleet_board_shows_at_once_and_the_session_page_resumes_and_stops(login, web):
    (run,) = web.api("POST", "fleet", body={"scenario": "many-short-turns", "count": 1,
                                            "provider": web.seed["provider"], "policy": web.seed["policy"],
                                            "turns_per_minute": 30, "loop": True})["runs"]
    session_id = run["session"]
    board = login("operator")
    board.goto(f"{web.url}/?q=Many")
    wait_live(board)
    row = board.locator(f"#session-{session_id}")
    row.locator("button", has_text="Pause").click()
    expect(row.locator(".state")).to_have_text("paused", timeout=3_000)  # the answer is the row itself
    expect(row.locator("button", has_text="Resume")).to_be_visible()
    page = login("operator", fresh=True)
    page.goto(f"{web.url}/sessions/{session_id}/")
    wait_live(page)
    card = page.locator("#run-controls")
    expect(card.locator("[data-run-status]")).to_have_text("paused")
    card.locator("button", has_text="Resume").click()
    expect(card.locator("[data-run-status]")).to_have_text("running")
    expect(row.locator(".state")).to_have_text("running", timeout=15_000)  # the other page hears it live
    page.locator("#run-controls button", has_text="Stop").click()
    expect(page.locator("#run-controls [data-run-status]")).to_have_text("stopped")
    expect(page.locator("#session-head .state")).to_have_text("stopped", timeout=15_000)
    expect(row.locator(".state")).to_have_text("stopped", timeout=15_000)


def test_an_operator_injects_a_fault_and_the_next_compaction_shows_its_retry(login, web):
    created = new_session(web, "Fault injection")
    page = login("operator")
    page.goto(f"{web.url}/sessions/{created['id']}/")
    wait_live(page)
    page.select_option("#fault-form select[name=fault]", "overloaded")
    page.fill("#fault-form input[name=times]", "1")
    page.click("#fault-form button[type=submit]")
    expect(page.locator("#fault-form .note--ok")).to_contain_text("Fault on")
    expect(page.locator("#fault-active")).to_contain_text("Overloaded: answers HTTP 429")
    expect(page.locator("#fault-active")).to_contain_text("1 left · not fired yet")
    page.select_option("#compact-form select[name=strategy]", "local")
    page.click("#compact-form button[type=submit]")
    done = page.locator('#compaction-status [data-status="completed"]')
    expect(done).to_be_visible(timeout=LIVE_TIMEOUT)
    expect(done).to_contain_text("1 retry")


def test_support_redoes_a_rolled_back_compaction_from_the_inspector_and_a_refusal_shows_beside_it(login, web):
    created = new_session(web, "Redo from the inspector")
    compaction = web.api("POST", f"sessions/{created['id']}/compact", body={"strategy": "local"})
    web.api("POST", f"compactions/{compaction['id']}/rollback", role="support", body={"reason": "check redo"})
    page = login("support")
    page.goto(f"{web.url}/compactions/{compaction['id']}/")
    expect(page.locator(".inspector-head .badge", has_text="rolled back")).to_be_visible()
    page.fill("#redo-reason", "it was right")
    page.click("#redo-button")
    expect(page.locator(".flash__item--success")).to_contain_text("redone")
    expect(page.locator(".inspector-head .badge", has_text="rolled back")).to_have_count(0)
    expect(page.locator("#rollback-button")).to_be_visible()
    # Rolled back again and the history moved on: redo is refused, and the reason shows beside the button.
    web.api("POST", f"compactions/{compaction['id']}/rollback", role="support", body={"reason": "again"})
    web.api("POST", f"sessions/{created['id']}/items", body={"items": [message("user", "a new request")]})
    page.goto(f"{web.url}/compactions/{compaction['id']}/")
    page.click("#redo-button")
    expect(page.locator("#redo-form .refusal")).to_be_visible()
    assert page.locator("#redo-form .refusal").inner_text().strip()


def test_a_stuck_session_is_marked_on_the_fleet_board_and_recovered_in_one_click(login, web):
    session_id = web.seed["stuck_session"]
    page = login("operator")
    page.goto(f"{web.url}/sessions/{session_id}/")
    wait_live(page)
    page.select_option("#compact-form select[name=strategy]", "remote_v1")
    page.click("#compact-form button[type=submit]")
    failed = page.locator('#compaction-status [data-status="failed"]')
    expect(failed).to_be_visible(timeout=LIVE_TIMEOUT)
    expect(failed).to_contain_text("context window exceeded")
    page.goto(f"{web.url}/?q=Stuck")
    row = page.locator(f"#session-{session_id}")
    expect(row.locator(".flag--stuck")).to_be_visible()
    row.locator("button", has_text="Recover: summarise").click()
    # The answer is the row with "Recovery started"; live updates may replace it at once with the running attempt.
    expect(page.locator(f"#session-{session_id} .refusal")).to_have_count(0)
    expect(page.locator(f"#session-{session_id} .outcome--completed")).to_be_visible(timeout=LIVE_TIMEOUT)
    expect(page.locator(f"#session-{session_id} .flag--stuck")).to_have_count(0)


def test_the_inspector_labels_methods_and_totals_and_fills_summary_tokens(login, web):
    created = new_session(web, "Numbers")
    compaction = web.api("POST", f"sessions/{created['id']}/compact", body={"strategy": "local"})
    page = login("operator")
    page.goto(f"{web.url}/compactions/{compaction['id']}/")
    expect(page.locator(".inspector-head")).to_contain_text("local summarisation")
    expect(page.locator("#token-totals-note")).to_be_hidden()  # folded under the figures (issue 47 item 9)
    page.click("#token-definitions > summary")
    expect(page.locator("#token-totals-note")).to_be_visible()
    expect(page.locator("#before .card__head")).to_contain_text("item estimates")
    summary_cell = page.locator("#attempts tbody tr").first.locator("td").nth(9)
    assert summary_cell.inner_text().strip() not in ("", "–")


def test_the_history_count_follows_live_appends(login, web):
    created = web.api("POST", "sessions", body={"title": "Count", "provider": web.seed["provider"],
                                                "policy": web.seed["policy"], "items": [message("user", "one")]})
    page = login("operator")
    page.goto(f"{web.url}/sessions/{created['id']}/")
    wait_live(page)
    expect(page.locator("#history-count")).to_contain_text("1 item")
    web.api("POST", f"sessions/{created['id']}/items", body={"items": [message("user", "two"),
                                                                      message("assistant", "three")]})
    expect(page.locator("#history-count")).to_contain_text("3 items", timeout=15_000)
