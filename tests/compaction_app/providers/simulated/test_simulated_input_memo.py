"""The simulated model counts a session's repeated input once: same usage and replies as counting it afresh,
in process (the body handed over as an object) or over HTTP (JSON)."""

from __future__ import annotations

import httpx
import pytest

from compaction_app.engine.history_snapshot import HistorySnapshot
from compaction_app.engine.port import ResponsesRequest
from compaction_app.engine.tokens import counter
from compaction_app.providers.client import ResponsesClient
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.in_process import InProcessTransport
from compaction_app.providers.simulated.app import create_app


def _user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _client(app, *, in_process: bool):
    transport = InProcessTransport(app=app) if in_process else httpx.ASGITransport(app=app)
    return ResponsesClient(ProviderConfig(name="sim", model="m", base_url="http://sim.test/v1"), transport=transport)


async def _ask(client, items, key="k"):
    events = [e async for e in client.stream_response(
        ResponsesRequest(model="m", input=items, instructions="Be brief.", prompt_cache_key=key))]
    return [e.item for e in events if e.type == "response.output_item.done"], events[-1].usage


def _history(n: int) -> list[dict]:
    return [_user(f"step {i}: " + "ledger entries reconcile nightly " * 40) for i in range(n)]


@pytest.mark.asyncio
@pytest.mark.parametrize("in_process", [True, False])
async def test_a_request_that_extends_the_previous_one_reports_what_a_fresh_count_reports(in_process):
    history = _history(12)
    warm = create_app()
    async with _client(warm, in_process=in_process) as client:
        await _ask(client, history)
        output, usage = await _ask(client, [*history, _user("and now the tests")])
    tok = counter("o200k_base")
    expected = tok.count_text("Be brief.") + sum(tok.count_item(i) for i in [*history, _user("and now the tests")])
    assert usage.input_tokens == expected
    shared = tok.count_text("Be brief.") + sum(tok.count_item(i) for i in history)
    assert usage.cached_input_tokens == shared - shared % 128
    assert output[-1]["role"] == "assistant"


@pytest.mark.asyncio
async def test_in_process_and_json_requests_get_the_same_reply_and_usage():
    items = [*_history(3), _user("read src/app.py")]
    async with _client(create_app(), in_process=True) as a, _client(create_app(), in_process=False) as b:
        assert await _ask(a, items) == await _ask(b, items)


@pytest.mark.asyncio
@pytest.mark.parametrize("as_sent", [list, HistorySnapshot], ids=["list", "snapshot"])
async def test_a_replaced_history_is_counted_in_full_and_shares_only_its_common_prefix(as_sent):
    # A snapshot of a replaced history (a compaction gives the session a new list) is not taken for an extension.
    history = _history(10)
    replaced = [*history[:8], _user("SUMMARY of the rest")]
    tok = counter("o200k_base")
    async with _client(create_app(), in_process=True) as client:
        await _ask(client, as_sent(history))
        _, usage = await _ask(client, as_sent(replaced))
    assert usage.input_tokens == tok.count_text("Be brief.") + sum(tok.count_item(i) for i in replaced)
    shared = tok.count_text("Be brief.") + sum(tok.count_item(i) for i in history[:8])
    assert shared >= 1024 and usage.cached_input_tokens == shared - shared % 128


@pytest.mark.asyncio
async def test_the_in_process_body_is_left_as_the_client_built_it():
    items = [{"role": "user", "content": "easy input form"}, *_history(2)]
    before = [dict(i) for i in items]
    async with _client(create_app(), in_process=True) as client:
        output, usage = await _ask(client, items)
    assert items == before and usage.input_tokens > 0 and output


@pytest.mark.asyncio
@pytest.mark.parametrize("in_process", [True, False])
async def test_a_snapshot_of_the_growing_history_is_counted_like_a_list(in_process):
    # A turn sends a HistorySnapshot of its session's history: in process it is recognised as an extension of the
    # previous request without comparing items; over HTTP it goes out as a JSON array. The usage is the same.
    grown = _history(12)
    async with _client(create_app(), in_process=in_process) as client:
        await _ask(client, HistorySnapshot(grown))
        grown.append(_user("and now the tests"))
        _, usage = await _ask(client, HistorySnapshot(grown))
    async with _client(create_app(), in_process=in_process) as client:
        await _ask(client, grown[:12])
        _, expected = await _ask(client, list(grown))
    assert usage == expected and usage.cached_input_tokens > 0


@pytest.mark.asyncio
async def test_an_older_snapshot_of_the_same_history_is_not_taken_for_an_extension():
    # The previous request saw 12 items; a snapshot of the first 10 of the same list is shorter: counted afresh.
    history = _history(12)
    tok = counter("o200k_base")
    async with _client(create_app(), in_process=True) as client:
        await _ask(client, HistorySnapshot(history))
        _, usage = await _ask(client, HistorySnapshot(history, 10))
    assert usage.input_tokens == tok.count_text("Be brief.") + sum(tok.count_item(i) for i in history[:10])


@pytest.mark.asyncio
async def test_a_snapshot_that_extends_the_previous_one_is_recognised_without_comparing_the_prefix(monkeypatch):
    # The O(1) path: same list, longer snapshot. Comparing the snapshots (HistorySnapshot.__eq__, the fallback that
    # walks the prefix) is made to fail, so only the extension check can tell the prefix is repeated.
    def no_comparing(self, other):
        raise AssertionError("the repeated prefix was compared item by item")

    grown = _history(12)
    async with _client(create_app(), in_process=True) as client:
        await _ask(client, HistorySnapshot(grown))
        grown.append(_user("and now the tests"))
        monkeypatch.setattr(HistorySnapshot, "__eq__", no_comparing)
        _, usage = await _ask(client, HistorySnapshot(grown))
    tok = counter("o200k_base")
    shared = tok.count_text("Be brief.") + sum(tok.count_item(i) for i in grown[:12])
    assert usage.cached_input_tokens == shared - shared % 128
