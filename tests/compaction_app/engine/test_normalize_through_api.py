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


def _compact_local(scripted_sessions, items: list[dict]) -> list[dict]:
    """Compact a session holding `items` locally through the API; the input the summary request sent."""
    session = scripted_sessions.create(items=items)
    scripted_sessions.script.add(text_reply("the summary"))
    compacted = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "local"},
                                           format="json")
    assert compacted.status_code in (200, 201), compacted.json()
    return scripted_sessions.script.requests[0].json["input"]


def test_a_tool_search_output_the_server_ran_stays_even_with_a_call_id_no_call_has(scripted_sessions):
    # Codex keeps any tool_search_output with execution "server" (remove_orphan_outputs), call id or not.
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "find a tool"}]}
    server_search = {"type": "tool_search_output", "call_id": "ts_server_1", "status": "completed",
                     "execution": "server", "tools": [{"type": "function", "name": "lookup"}]}
    client_orphan = {"type": "tool_search_output", "call_id": "ts_client_9", "status": "completed",
                     "execution": "client", "tools": []}
    sent = _compact_local(scripted_sessions, [user, server_search, client_orphan])
    assert server_search in sent and client_orphan not in sent


def test_a_call_with_an_empty_call_id_gets_its_aborted_output_and_an_empty_id_output_answers_it(scripted_sessions):
    # Codex keys calls and outputs by the id string, the empty string included.
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run it"}]}
    unanswered = {"type": "function_call", "name": "exec_command", "call_id": "", "arguments": "{}"}
    custom = {"type": "custom_tool_call", "name": "apply_patch", "call_id": "", "input": "*** Begin Patch"}
    custom_answer = {"type": "custom_tool_call_output", "call_id": "", "output": "patched"}
    sent = _compact_local(scripted_sessions, [user, unanswered, custom, custom_answer])
    assert sent[1:5] == [unanswered, {"type": "function_call_output", "call_id": "", "output": "aborted"},
                         custom, custom_answer]


def test_dropping_the_oldest_item_drops_its_partner_of_the_same_tool_kind(scripted_sessions):
    # The summary request is over the window once: the oldest item goes with its partner (spec §6.1). The
    # function call "c1" is answered by the function output, not by the custom output that shares its id.
    from tests.fakes.scripted_provider import Reply

    call = {"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": "{}"}
    other_kind = {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c1", "input": "p"}
    other_output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "patched"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "ran"}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and now?"}]}
    session = scripted_sessions.create(items=[call, other_kind, other_output, output, user])
    scripted_sessions.script.add(Reply.error(400, {"error": {"code": "context_length_exceeded",
                                                             "message": "Your input exceeds the context window."}}),
                                 text_reply("the summary"))
    compacted = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "local"},
                                           format="json")
    assert compacted.status_code in (200, 201), compacted.json()
    retried = scripted_sessions.script.requests[1].json["input"]
    assert retried[:3] == [other_kind, other_output, user]
