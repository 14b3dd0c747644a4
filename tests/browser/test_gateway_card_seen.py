"""The gateway card as an operator watching a Codex session sees it (issue 47, item 2: nothing looks done that is not):
its request count moves with each request without a reload, "A compaction is asked for..." goes once the gateway ran
it, and the notice that replaces it says the compaction freed nothing when its figures say so. Codex's requests
are sent the way Codex sends them (turn metadata, the history growing) to a route on the embedded model, on a
server of its own (COMPACTWEB_SEED_GATEWAY) so the other browser tests keep their board without gateway sessions."""

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
