"""The gateway as a user and an operator see it, on a server of its own (COMPACTWEB_SEED_GATEWAY: a Codex route and
a Claude Code route on the embedded model), so the other browser tests keep their board without gateway sessions.

- Issue 47, item 2 (nothing looks done that is not): the gateway card's request count moves with each request
  without a reload, "A compaction is asked for..." goes once the gateway ran it, and the notice that replaces it
  says the compaction freed nothing when its figures say so. Codex's requests are sent the way Codex sends them
  (turn metadata, the history growing).
- Issue 47, item 5 (set-up from the pages): the keys page gives a new key with Claude Code's variables and Codex's
  config.toml for this host, each copied by its Copy button, and what was copied works against the gateway."""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import serving
from tests.browser.test_operator_controls import LIVE_TIMEOUT, wait_live
from tests.browser.test_operator_finish import checked_page


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("browser-gateway-var"), COMPACTWEB_SEED_GATEWAY="1") as server:
        yield server


class Codex:
    """Codex's requests, one thread: the turn metadata header and the whole history each time."""

    def __init__(self, url: str, route: str, key: str) -> None:
        self.url, self.route, self.key = url, route, key
        self.thread = str(uuid.uuid4())
        self.history: list[dict] = []

    def turn(self, text: str) -> None:
        self.history.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
        answer = httpx.post(
            f"{self.url}/gateway/r/{self.route}/v1/responses", timeout=60,
            headers={"Authorization": f"Bearer {self.key}", "x-codex-turn-metadata": json.dumps(
                {"session_id": self.thread, "thread_id": self.thread, "turn_id": f"turn-{len(self.history)}"})},
            json={"model": "sim-1", "stream": False, "input": self.history})
        assert answer.status_code == 200, answer.text
        self.history += answer.json()["output"]


def test_the_gateway_card_counts_requests_live_and_clears_an_asked_for_compaction_once_it_ran(
        browser, web, screenshot_dir):
    codex = Codex(web.url, web.seed["gateway"]["route"], web.seed["gateway"]["key"])
    codex.turn("The parser drops the last token of every line; find out why.")
    page = checked_page(browser, web, "operator")
    page.goto(f"{web.url}/")
    page.locator("a", has_text="The parser drops the last token").first.click()
    wait_live(page)
    card = page.locator("#gateway-card")
    expect(card.locator("#gateway-requests")).to_have_text("1 request")

    codex.turn("Fix it and add a regression test.")
    expect(card.locator("#gateway-requests")).to_have_text("2 requests", timeout=LIVE_TIMEOUT)

    card.locator("#gateway-compact-next").click()
    wait_live(page)
    pending = card.locator("#gateway-compact-pending")
    expect(pending).to_contain_text("A compaction is asked for by")
    codex.turn("Now run the whole suite.")
    # Without a reload: the line goes, the count moves, and the notice says what the compaction did.
    expect(pending).to_have_count(0, timeout=LIVE_TIMEOUT)
    expect(card.locator("#gateway-requests")).to_have_text("3 requests", timeout=LIVE_TIMEOUT)
    notice = card.locator("#gateway-notice")
    expect(notice).to_be_visible()
    text = notice.inner_text()
    before, after = (int(n.replace(",", "")) for n in re.search(r"([\d,]+) tokens → [\d,]+ items, ([\d,]+) tokens",
                                                                  text).groups())
    if after >= before:
        assert "freed nothing" in text and "compacted" not in text, text
    else:
        assert "compacted" in text and "freed nothing" not in text, text
    page.screenshot(path=str(screenshot_dir / "gateway-card-live.png"), full_page=True)
    page.context.close()


def test_the_keys_page_copies_claude_codes_variables_and_codexs_config_for_this_host_and_they_work(browser, web):
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    user = web.user("operator")
    page.goto(f"{web.url}/login/")
    page.fill("#id_username", user["username"])
    page.fill("#id_password", user["password"])
    page.click("button[type=submit]")
    page.goto(f"{web.url}/gateway-keys/")
    page.fill("#gateway-key-form input[name=name]", "laptop")
    page.locator("#gateway-key-form button[type=submit]").click()
    key = page.locator("#new-gateway-key code").inner_text().strip()
    assert key.startswith("cwg_")
    page.evaluate("document.querySelectorAll('details.codex-config-card').forEach(d => d.open = true)")

    def copied(block: str) -> str:
        button = page.locator(f"button[data-copy='{block}']")
        button.click()
        expect(button).to_have_text("Copied")
        return page.evaluate("navigator.clipboard.readText()")

    claude_base = f"{web.url}/gateway/r/claude/anthropic"
    assert copied("#claude-code-env-claude") == (f"export ANTHROPIC_BASE_URL={claude_base}\n"
                                                 f"export ANTHROPIC_API_KEY={key}")
    codex_base = f"{web.url}/gateway/r/team/v1"
    assert f'base_url = "{codex_base}"' in copied("#codex-custom-team")
    assert copied("#codex-custom-env-team") == f"export COMPACTWEB_GATEWAY_KEY={key}"
    assert f'openai_base_url = "{codex_base}"' in copied("#codex-builtin-team")
    context.close()

    # What was copied works: Claude Code's request and Codex's, each with the new key at the copied address.
    thread = str(uuid.uuid4())
    claude = httpx.post(f"{claude_base}/v1/messages", timeout=60,
                        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
                        json={"model": "claude-sim", "max_tokens": 200,
                              "metadata": {"user_id": f"user_x_account__session_{thread}"},
                              "messages": [{"role": "user", "content": "please fix parser bug 3"}]})
    assert claude.status_code == 200, claude.text
    codex = httpx.post(f"{codex_base}/responses", timeout=60, headers={"Authorization": f"Bearer {key}"},
                       json={"model": "sim-1", "stream": False, "prompt_cache_key": thread,
                             "input": [{"type": "message", "role": "user",
                                        "content": [{"type": "input_text", "text": "please fix parser bug 3"}]}]})
    assert codex.status_code == 200, codex.text
