"""The simulated model over Anthropic's Messages API (issue 35): plain JSON and Anthropic's SSE event sequence,
tool_use blocks for the tools offered, usage, count_tokens, Claude Code's summary request, and 400s for bad
bodies."""

from __future__ import annotations

import json

import httpx
import pytest

from compaction_app.providers.simulated.app import create_app
from compaction_app.providers.simulated.replies import planned_tool_calls

BASH = {"name": "Bash", "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
REMINDER = "<system-reminder>\nToday's date is 2026-12-02.\n</system-reminder>"
PROMPT = "now write the docs for the loader module"
assert planned_tool_calls(PROMPT) >= 2  # the simulated model calls tools first for this prompt


def _http(app):
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim.test")


def _events(raw: str) -> list[tuple[str, dict]]:
    out = []
    for block in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        out.append((lines["event"], data))
    return out


@pytest.mark.asyncio
async def test_a_prompt_with_tools_is_answered_with_a_tool_use_block_and_usage():
    async with _http(create_app()) as http:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": [{"type": "text", "text": "You are Claude."}],
                "tools": [BASH], "messages": [{"role": "user", "content": [{"type": "text", "text": REMINDER},
                                                                          {"type": "text", "text": PROMPT}]}]}
        response = await http.post("/anthropic/v1/messages?beta=true", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["type"] == "message" and answer["role"] == "assistant" and answer["stop_reason"] == "tool_use"
        (block,) = answer["content"]
        assert block["type"] == "tool_use" and block["name"] == "Bash" and block["id"].startswith("toolu_")
        assert isinstance(block["input"]["command"], str) and block["input"]["command"]
        usage = answer["usage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0 and usage["cache_read_input_tokens"] == 0

        # The tool's result comes back: the model answers in text, and the repeated prefix is reported as cached.
        body["messages"] += [{"role": "assistant", "content": [block]},
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"],
                                                           "content": "notes.txt"}]}]
        counted = await http.post("/anthropic/v1/messages/count_tokens", json=body)
        assert counted.status_code == 200 and counted.json()["input_tokens"] > usage["input_tokens"]
        follow = (await http.post("/anthropic/v1/messages", json=body)).json()
        assert follow["usage"]["input_tokens"] + follow["usage"]["cache_read_input_tokens"] == \
            counted.json()["input_tokens"]


@pytest.mark.asyncio
async def test_a_streamed_answer_follows_anthropics_event_sequence():
    async with _http(create_app()) as http:
        body = {"model": "m", "max_tokens": 100, "stream": True, "tools": [BASH],
                "messages": [{"role": "user", "content": PROMPT}]}
        response = await http.post("/anthropic/v1/messages", json=body)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = _events(response.text)
        kinds = [kind for kind, _ in events]
        assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
        assert kinds[2:5] == ["content_block_start", "content_block_delta", "content_block_stop"]
        start = dict(events)["content_block_start"]["content_block"]
        delta = dict(events)["content_block_delta"]["delta"]
        assert start["type"] == "tool_use" and start["input"] == {}
        assert delta["type"] == "input_json_delta" and json.loads(delta["partial_json"])["command"]
        final = dict(events)["message_delta"]
        assert final["delta"]["stop_reason"] == "tool_use" and final["usage"]["output_tokens"] > 0
        assert dict(events)["message_start"]["message"]["usage"]["input_tokens"] > 0


@pytest.mark.asyncio
async def test_claude_codes_summary_request_is_answered_with_a_summary_of_the_users_goals():
    prompt = ("CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\nYour task is to create a detailed summary "
              "of the conversation so far, paying close attention to the user's explicit requests.")
    async with _http(create_app()) as http:
        body = {"model": "m", "max_tokens": 100, "tools": [BASH], "messages": [
            {"role": "user", "content": PROMPT}, {"role": "assistant", "content": "Looked at the parser."},
            {"role": "user", "content": [{"type": "text", "text": prompt}]}]}
        answer = (await http.post("/anthropic/v1/messages", json=body)).json()
        (block,) = answer["content"]
        assert block["type"] == "text" and PROMPT in block["text"] and answer["stop_reason"] == "end_turn"


@pytest.mark.asyncio
async def test_bad_message_bodies_are_400s():
    async with _http(create_app()) as http:
        for messages in ("hi", [{"role": "system", "content": "x"}], [{"role": "user", "content": 3}],
                         [{"role": "user", "content": ["not a block"]}]):
            response = await http.post("/anthropic/v1/messages", json={"model": "m", "messages": messages})
            assert response.status_code == 400, messages
            assert response.json()["error"]["code"] == "invalid_request_error"
