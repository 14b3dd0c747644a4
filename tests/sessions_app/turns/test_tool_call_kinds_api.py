"""Every call kind the client executes gets its output and a follow-up request, with the mid-turn check in between
(spec §2.4 item 2), through `POST /sessions/<id>/turns` on the scripted provider. A call the server already
executed needs no follow-up."""

from __future__ import annotations

import random

import pytest

from sessions_app.simulator.distributions import fixed
from sessions_app.simulator.tools import ShellTool, answer_tool_call
from tests.fakes.scripted_api import compaction_reply, items_reply, text_reply

pytestmark = pytest.mark.django_db

LOCAL_SHELL = {"type": "local_shell_call", "id": "ls_1", "call_id": "call_ls", "status": "completed",
               "action": {"type": "exec", "command": ["bash", "-lc", "pytest -q"], "workdir": "/repo"}}
CUSTOM = {"type": "custom_tool_call", "call_id": "call_custom", "name": "apply_patch",
          "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"}
CLIENT_SEARCH = {"type": "tool_search_call", "call_id": "call_search", "execution": "client",
                 "arguments": {"query": "deploy"}}
SERVER_SEARCH = {"type": "tool_search_call", "call_id": "call_srv", "execution": "server",
                 "arguments": {"query": "deploy"}}


@pytest.mark.parametrize(("call", "output"), [
    (LOCAL_SHELL, {"type": "function_call_output", "call_id": "call_ls", "output": "unsupported call: local_shell"}),
    (CUSTOM, {"type": "custom_tool_call_output", "call_id": "call_custom",
              "output": "unsupported custom tool call: apply_patch"}),
    (CLIENT_SEARCH, {"type": "tool_search_output", "call_id": "call_search", "status": "completed",
                     "execution": "client", "tools": []}),
], ids=["local_shell_call", "custom_tool_call", "client_tool_search_call"])
def test_a_client_executed_call_gets_its_output_and_a_follow_up_request(scripted_sessions, call, output):
    script = scripted_sessions.script
    session = scripted_sessions.create()
    script.add(items_reply(call), text_reply("all done"))

    data = scripted_sessions.turn(session["id"], "run the tests")

    assert data["status"] == "completed" and data["sampling_requests"] == 2 and data["tool_calls"] == 1, data
    follow_up = script.requests[1].json["input"]
    assert follow_up[-2:] == [call, output]
    assert [i["type"] for i in data["items"]][-3:] == [call["type"], output["type"], "message"]
    assert data["final_message"] == "all done"


def test_a_local_shell_call_without_call_id_is_answered_under_its_item_id(scripted_sessions):
    script = scripted_sessions.script
    session = scripted_sessions.create()
    call = {k: v for k, v in LOCAL_SHELL.items() if k != "call_id"}
    script.add(items_reply(call), text_reply())

    scripted_sessions.turn(session["id"])

    assert script.requests[1].json["input"][-1]["call_id"] == "ls_1"


def test_a_call_the_server_already_executed_needs_no_follow_up(scripted_sessions):
    script = scripted_sessions.script
    session = scripted_sessions.create()
    script.add(items_reply(SERVER_SEARCH, {"type": "message", "role": "assistant",
                                           "content": [{"type": "output_text", "text": "found it"}]}))

    data = scripted_sessions.turn(session["id"])

    assert data["status"] == "completed" and data["sampling_requests"] == 1 and data["tool_calls"] == 0
    assert len(script.requests) == 1


def test_the_mid_turn_check_runs_between_a_local_shell_call_and_its_follow_up(scripted_sessions):
    script = scripted_sessions.script
    session = scripted_sessions.create(policy_fields={"auto_compact_token_limit": 2_000})
    script.add(items_reply(LOCAL_SHELL, input_tokens=5_000), compaction_reply("ENC-MID"), text_reply("after"))

    data = scripted_sessions.turn(session["id"])

    assert data["compactions"] == [{"reason": "context_limit", "phase": "mid_turn", "ok": True, "error": ""}], data
    assert script.requests[1].json["input"][-1] == {"type": "compaction_trigger"}
    assert script.requests[2].json["input"][-1]["type"] == "compaction"
    assert data["final_message"] == "after"


def test_the_simulated_shell_answers_a_local_shell_call_with_its_exec_summary():
    shell = ShellTool(cwd="/repo", output=fixed(50))

    output, new_window = answer_tool_call(LOCAL_SHELL, {"shell": shell}, random.Random(1))

    assert output["type"] == "function_call_output" and output["call_id"] == "call_ls"
    assert output["output"].startswith("Exit code: ") and not new_window
