"""The normalised input a compaction sends (spec §6, Codex's normaliser), seen through the JSON API: calls and
outputs pair by kind as well as by call id, and a tool search the server ran keeps its output."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_api import text_reply

pytestmark = pytest.mark.django_db


def test_outputs_pair_with_calls_by_kind_and_server_tool_search_outputs_stay(scripted_sessions):
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look it up"}]}
    call = {"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": "{}"}
    wrong_kind = {"type": "custom_tool_call_output", "call_id": "c1", "output": "not the function's answer"}
    server_search = {"type": "tool_search_output", "status": "completed", "execution": "server", "tools": []}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    session = scripted_sessions.create(items=[user, call, wrong_kind, server_search, answer])
    scripted_sessions.script.add(text_reply("the summary"))

    compacted = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "local"},
                                           format="json")

    assert compacted.status_code in (200, 201), compacted.json()
    sent = scripted_sessions.script.requests[0].json["input"]
    kinds = [(i.get("type"), i.get("call_id")) for i in sent]
    # The custom output does not answer a function call: dropped, and the call gets its "aborted" output.
    assert ("custom_tool_call_output", "c1") not in kinds
    assert sent[kinds.index(("function_call", "c1")) + 1] == {
        "type": "function_call_output", "call_id": "c1", "output": "aborted"}
    assert server_search in sent
