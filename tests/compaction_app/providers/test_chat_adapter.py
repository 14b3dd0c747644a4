"""The chat-completions adapter: item ↔ message conversion, streamed chunks → Responses events, no remote compaction."""

from __future__ import annotations

import json

import httpx
import pytest

from compaction_app.engine.port import CompactRequest, ResponsesRequest
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.chat import ChatClient, chat_body
from compaction_app.providers.chat_format import items_to_messages, messages_to_items
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.simulated.app import create_app
from compaction_app.providers.simulated.replies import planned_tool_calls
from tests.fakes import scripted_provider as sp

TOOLS = [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}]


def _user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


HISTORY = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be careful"}]},
    _user("run the tests"),
    {"type": "reasoning", "summary": [], "encrypted_content": "zzz"},
    {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"command": "pytest"}'},
    {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": '{"command": "ls"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "2 passed"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "a.py"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "all green"}]},
    {"type": "compaction", "encrypted_content": "opaque"},
]


def test_items_become_chat_messages():
    messages = items_to_messages(HISTORY, instructions="You are a coder.")
    assert messages == [
        {"role": "system", "content": "You are a coder."},
        {"role": "system", "content": "be careful"},
        {"role": "user", "content": "run the tests"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"command": "pytest"}'}},
            {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": '{"command": "ls"}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "2 passed"},
        {"role": "tool", "tool_call_id": "c2", "content": "a.py"},
        {"role": "assistant", "content": "all green"},
    ]


def test_messages_convert_back_to_items():
    instructions, items = messages_to_items(items_to_messages(HISTORY, instructions="sys"))
    assert instructions == "sys"
    assert [i["type"] for i in items] == ["message", "message", "function_call", "function_call",
                                          "function_call_output", "function_call_output", "message"]
    assert items[0]["role"] == "developer" and items[2]["call_id"] == "c1"


def test_chat_body_asks_for_usage_and_converts_tools():
    body = chat_body(ResponsesRequest(model="m", input=[_user("x")], tools=TOOLS))
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [{"type": "function", "function": {"name": "shell", "parameters": TOOLS[0]["parameters"]}}]
    assert "tools" not in chat_body(ResponsesRequest(model="m", input=[_user("x")]))


def _sim_client():
    config = ProviderConfig(name="chat", model="m", base_url="http://sim.test/v1", wire_api="chat")
    return ChatClient(config, transport=httpx.ASGITransport(app=create_app()))


@pytest.mark.asyncio
async def test_text_turn_against_the_simulator_yields_message_and_server_usage():
    text = next(t for t in (f"explain module {n}" for n in range(50)) if planned_tool_calls(t) == 0)
    async with _sim_client() as client:
        events = [e async for e in client.stream_response(ResponsesRequest(model="m", input=[_user(text)],
                                                                          tools=TOOLS))]
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    (message,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert message["role"] == "assistant"
    assert "".join(e.delta for e in events if e.delta) == message["content"][0]["text"]
    assert events[-1].usage.input_tokens > 0 and events[-1].usage.output_tokens > 0


@pytest.mark.asyncio
async def test_tool_call_turn_against_the_simulator_yields_function_call_items():
    text = next(t for t in (f"fix bug {n} in app.py" for n in range(50)) if planned_tool_calls(t) > 0)
    async with _sim_client() as client:
        events = [e async for e in client.stream_response(ResponsesRequest(model="m", input=[_user(text)],
                                                                          tools=TOOLS))]
    (call,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert call["type"] == "function_call" and call["name"] == "shell" and call["call_id"]
    assert "command" in json.loads(call["arguments"])


@pytest.mark.asyncio
async def test_fragmented_tool_calls_merge_and_missing_usage_is_estimated(scripted_provider):
    def chunk(delta, finish=None):
        return "data: " + json.dumps({"id": "cc1", "choices": [{"index": 0, "delta": delta,
                                                                 "finish_reason": finish}]}) + "\n\n"
    scripted_provider.add(sp.Reply.sse([
        chunk({"role": "assistant", "content": "Look"}),
        chunk({"content": "ing"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_9", "function": {"name": "read_file", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]}),
        chunk({}, "tool_calls"),
        "data: [DONE]\n\n",
    ]))
    config = ProviderConfig(name="chat", model="m", base_url="http://fake.test/v1", wire_api="chat")
    async with ChatClient(config, transport=httpx.ASGITransport(app=scripted_provider)) as client:
        events = [e async for e in client.stream_response(ResponsesRequest(model="m", input=[_user("read a.py")]))]
    items = [e.item for e in events if e.type == "response.output_item.done"]
    assert items[0]["content"][0]["text"] == "Looking"
    assert items[1] == {"type": "function_call", "call_id": "call_9", "name": "read_file",
                        "arguments": '{"path": "a.py"}'}
    usage = events[-1].usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0 and usage.cached_input_tokens == 0
    assert scripted_provider.requests[0].path == "/v1/chat/completions"


@pytest.mark.asyncio
async def test_chat_stream_without_finish_or_done_is_stream_closed():
    config = ProviderConfig(name="chat", model="m", base_url="http://sim.test/v1", wire_api="chat",
                            extra_headers={"X-Sim-Fault": "stream_closed"})
    async with ChatClient(config, transport=httpx.ASGITransport(app=create_app())) as client:
        with pytest.raises(ProviderError) as caught:
            [e async for e in client.stream_response(ResponsesRequest(model="m", input=[_user("x")]))]
    assert caught.value.kind is ErrorKind.STREAM_CLOSED
    assert caught.value.message == "stream closed before response.completed"


@pytest.mark.asyncio
async def test_chat_http_errors_are_classified_like_responses_errors():
    config = ProviderConfig(name="chat", model="m", base_url="http://sim.test/v1", wire_api="chat",
                            extra_headers={"X-Sim-Context-Window": "5"})
    async with ChatClient(config, transport=httpx.ASGITransport(app=create_app())) as client:
        with pytest.raises(ProviderError) as caught:
            [e async for e in client.stream_response(ResponsesRequest(model="m", input=[_user("a long input")]))]
    assert caught.value.kind is ErrorKind.CONTEXT_WINDOW_EXCEEDED and caught.value.http_status == 400


@pytest.mark.asyncio
async def test_chat_providers_have_no_remote_compaction():
    async with _sim_client() as client:
        with pytest.raises(ProviderError) as v1:
            await client.compact(CompactRequest(model="m", input=[_user("x")]))
        with pytest.raises(ProviderError) as v2:
            [e async for e in client.stream_response(
                ResponsesRequest(model="m", input=[_user("x"), {"type": "compaction_trigger"}]))]
    for error in (v1.value, v2.value):
        assert error.kind is ErrorKind.NOT_FOUND and "no remote compaction" in error.message
