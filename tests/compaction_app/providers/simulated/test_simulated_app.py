"""The simulated provider's HTTP surface: routes, exact usage, compaction output, fault injection."""

from __future__ import annotations

import json

import httpx
import pytest

from compaction_app.engine.port import ResponsesRequest
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.tokens import counter
from compaction_app.providers.client import ResponsesClient
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.simulated import codec
from compaction_app.providers.simulated.app import create_app
from compaction_app.providers.simulated.faults import FaultSyntaxError, parse_faults

PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary."


def _user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _http(app, **headers):
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim.test", headers=headers)


def _client(app, **headers):
    config = ProviderConfig(name="sim", model="m", base_url="http://sim.test/v1", extra_headers=headers)
    return ResponsesClient(config, transport=httpx.ASGITransport(app=app))


async def _events(client, items, **kw):
    return [e async for e in client.stream_response(ResponsesRequest(model="m", input=items, **kw))]


@pytest.mark.asyncio
async def test_models_route_unknown_route_and_wrong_method():
    async with _http(create_app(model="sim-x")) as http:
        models = await http.get("/v1/models")
        assert models.json()["data"][0]["id"] == "sim-x"
        missing = await http.post("/v1/nope", json={})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        wrong = await http.get("/v1/responses")
        assert wrong.status_code == 405
        bad = await http.post("/v1/responses", content=b"not json")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request_error"


@pytest.mark.asyncio
async def test_root_path_prefix_is_stripped_when_the_server_keeps_it_in_path():
    async with _http(create_app(root_path="/sim")) as http:
        assert (await http.get("/sim/v1/models")).status_code == 200


@pytest.mark.asyncio
async def test_usage_is_the_exact_token_count_of_instructions_and_input():
    items = [_user("count these tokens please"), {"type": "function_call_output", "call_id": "x", "output": "ok"}]
    async with _client(create_app()) as client:
        events = await _events(client, items, instructions="Be brief.")
    tok = counter("o200k_base")
    expected_in = tok.count_text("Be brief.") + sum(tok.count_item(i) for i in items)
    outputs = [e.item for e in events if e.type == "response.output_item.done"]
    usage = events[-1].usage
    assert usage.input_tokens == expected_in
    assert usage.output_tokens == sum(tok.count_item(i) for i in outputs)


@pytest.mark.asyncio
async def test_repeated_long_prefix_reports_cached_tokens():
    items = [_user("word " * 3000)]
    async with _client(create_app()) as client:
        first = (await _events(client, items, prompt_cache_key="k"))[-1].usage
        second = (await _events(client, [*items, _user("more")], prompt_cache_key="k"))[-1].usage
    assert first.cached_input_tokens == 0
    assert 1024 <= second.cached_input_tokens <= first.input_tokens and second.cached_input_tokens % 128 == 0


@pytest.mark.asyncio
async def test_summarization_prompt_gets_an_extractive_summary_over_http():
    items = [_user("Refactor db/session.py to use a pool"), _user(PROMPT)]
    async with _client(create_app()) as client:
        events = await _events(client, items)
    (message,) = [e.item for e in events if e.type == "response.output_item.done"]
    text = message["content"][0]["text"]
    assert "Refactor db/session.py to use a pool" in text and "`db/session.py`" in text


@pytest.mark.asyncio
async def test_compact_keeps_user_messages_only_and_the_payload_remembers_the_rest():
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions/>"}]},
        _user("<environment_context>cwd=/x</environment_context>"),
        _user("Speed up the search index in search/index.py"),
        {"type": "function_call", "call_id": "c", "name": "shell", "arguments": '{"command": "make bench"}'},
        {"type": "function_call_output", "call_id": "c", "output": "RuntimeError: index locked"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "found the lock"}]},
    ]
    async with _http(create_app()) as http:
        answer = (await http.post("/v1/responses/compact", json={"model": "m", "input": items})).json()
    assert answer["object"] == "response.compaction"
    assert answer["output"][:-1] == [items[2]]
    payload = codec.decode(answer["output"][-1]["encrypted_content"])
    assert "make bench" in payload["digest"]["commands"]
    assert "RuntimeError: index locked" in payload["digest"]["errors"]
    assert answer["usage"]["input_tokens"] > 0 and answer["usage"]["output_tokens"] > 0


@pytest.mark.asyncio
async def test_trigger_that_is_not_the_last_item_is_rejected():
    async with _client(create_app()) as client:
        with pytest.raises(ProviderError) as caught:
            await _events(client, [{"type": "compaction_trigger"}, _user("x")])
    assert caught.value.kind is ErrorKind.INVALID_REQUEST and "final input item" in caught.value.message


@pytest.mark.asyncio
async def test_input_over_the_window_always_fails_with_context_length_exceeded():
    items = [_user("a fairly long message " * 20)]
    async with _client(create_app(context_window=50)) as client:
        with pytest.raises(ProviderError) as caught:
            await _events(client, items)
    assert caught.value.kind is ErrorKind.CONTEXT_WINDOW_EXCEEDED and caught.value.code == "context_length_exceeded"
    async with _client(create_app(context_window=50), **{"X-Sim-Context-Window": "100000"}) as client:
        assert (await _events(client, items))[-1].type == "response.completed"


@pytest.mark.asyncio
async def test_counted_faults_fail_n_requests_per_key_then_succeed():
    app = create_app()
    async with _client(app, **{"X-Sim-Fault": "server_error;times=2;key=s1"}) as client:
        for _ in range(2):
            with pytest.raises(ProviderError) as caught:
                await _events(client, [_user("x")])
            assert caught.value.kind is ErrorKind.SERVER_ERROR
        assert (await _events(client, [_user("x")]))[-1].type == "response.completed"
    async with _client(app, **{"X-Sim-Fault": "server_error;times=2;key=s2"}) as other_session:
        with pytest.raises(ProviderError):
            await _events(other_session, [_user("x")])


@pytest.mark.asyncio
async def test_slow_fault_waits_through_the_injected_sleep(sleeps):
    async with _client(create_app(sleep=sleeps), **{"X-Sim-Fault": "slow=2.5"}) as client:
        assert (await _events(client, [_user("x")]))[-1].type == "response.completed"
    assert sleeps == [2.5]


@pytest.mark.asyncio
async def test_bad_json_event_in_a_stream_is_skipped():
    async with _client(create_app(), **{"X-Sim-Fault": "bad_json"}) as client:
        events = await _events(client, [_user("x")])
    assert events[-1].type == "response.completed"


@pytest.mark.asyncio
async def test_reasoning_included_header_reaches_the_completed_event():
    async with _client(create_app(), **{"X-Sim-Reasoning-Included": "true"}) as client:
        assert (await _events(client, [_user("x")]))[-1].reasoning_included is True
    async with _client(create_app()) as client:
        assert (await _events(client, [_user("x")]))[-1].reasoning_included is False


@pytest.mark.asyncio
async def test_malformed_fault_header_is_a_clear_400():
    async with _http(create_app(), **{"X-Sim-Fault": "explode"}) as http:
        answer = await http.post("/v1/responses", json={"model": "m", "input": []})
    assert answer.status_code == 400 and "unknown fault 'explode'" in answer.json()["error"]["message"]


@pytest.mark.parametrize("header, message", [
    ("slow=abc", "slow needs"),
    ("overloaded;times=x", "times must be"),
    ("overloaded;status=500", "status must be 429 or 503"),
    ("server_error;colour=red", "bad fault parameter"),
])
def test_fault_grammar_errors(header, message):
    with pytest.raises(FaultSyntaxError, match=message):
        parse_faults(header)


def test_fault_grammar_parses_several_faults_with_parameters():
    slow, overloaded = parse_faults("slow=0.5, overloaded;status=503;times=2;key=abc")
    assert (slow.name, slow.seconds) == ("slow", 0.5)
    assert (overloaded.times, overloaded.key, overloaded.params["status"]) == (2, "abc", "503")


@pytest.mark.asyncio
async def test_chat_endpoint_answers_without_streaming_too():
    async with _http(create_app()) as http:
        answer = await http.post("/v1/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": "Summarize our work so far"}]})
    body = answer.json()
    assert body["object"] == "chat.completion" and body["usage"]["prompt_tokens"] > 0
    assert body["choices"][0]["message"]["content"].startswith("Handoff summary")
    assert body["choices"][0]["finish_reason"] == "stop"


async def _websocket_handshake(app, extensions):
    sent = []
    messages = iter([{"type": "websocket.connect"}])

    async def receive():
        return next(messages)

    async def send(message):
        sent.append(message)

    await app({"type": "websocket", "path": "/v1/responses", "headers": [], "extensions": extensions},
              receive, send)
    return sent


@pytest.mark.asyncio
async def test_a_responses_websocket_upgrade_is_refused_with_426_so_clients_fall_back_to_http():
    sent = await _websocket_handshake(create_app(), {"websocket.http.response": {}})
    assert sent[0]["type"] == "websocket.http.response.start" and sent[0]["status"] == 426
    assert b"websocket_not_supported" in sent[1]["body"]


@pytest.mark.asyncio
async def test_without_the_denial_extension_the_upgrade_is_refused_by_closing_before_accept():
    sent = await _websocket_handshake(create_app(), {})
    assert [m["type"] for m in sent] == ["websocket.close"]


@pytest.mark.asyncio
async def test_the_recorder_writes_down_every_request_it_received(tmp_path):
    from compaction_app.providers.simulated.recording import RequestRecorder, read_requests

    app = create_app(recorder=RequestRecorder(tmp_path))
    async with _http(app, **{"session-id": "s1", "authorization": "Bearer secret"}) as http:
        await http.post("/v1/responses", json={"model": "m", "input": [_user("hello")]})
        await http.post("/v1/responses/compact", json={"model": "m", "input": [_user("hello")]})
    recorded = read_requests(tmp_path)
    assert [r["endpoint"] for r in recorded] == ["/v1/responses", "/v1/responses/compact"]
    assert recorded[0]["body"]["input"] == [_user("hello")]
    assert recorded[0]["headers"] == {"session-id": "s1"}  # never the authorization header


async def _body_sends(app, headers: dict[str, str]) -> list[bytes]:
    """The bodies of the app's http.response.body messages for one streamed /responses request, as a server
    would get them (each is one write, one HTTP chunk)."""
    raw = json.dumps({"model": "m", "stream": True, "input": [_user("tell me a longer story " * 20)]}).encode()
    sent, received = [], [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive():
        return received.pop(0)

    async def send(message):
        if message["type"] == "http.response.body":
            sent.append(message["body"])

    scope = {"type": "http", "method": "POST", "path": "/v1/responses",
             "headers": [(k.encode(), v.encode()) for k, v in {"content-type": "application/json", **headers}.items()]}
    await app(scope, receive, send)
    return sent


@pytest.mark.asyncio
async def test_a_streamed_answer_goes_out_in_one_write_or_one_write_per_event_when_asked():
    whole = await _body_sends(create_app(), {})
    per_event = await _body_sends(create_app(), {"x-sim-stream": "events"})
    assert len(whole) == 1 and whole[0].count(b"\n\n") > 10  # every event of the answer in the one write
    events = [chunk for chunk in per_event if chunk]
    assert len(events) == whole[0].count(b"\n\n") and all(chunk.endswith(b"\n\n") for chunk in events)
    assert [e.split(b"\n", 1)[0] for e in events] == [e.split(b"\n", 1)[0] for e in whole[0].split(b"\n\n")[:-1]]
