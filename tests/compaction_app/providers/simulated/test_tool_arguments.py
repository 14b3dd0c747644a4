"""Arguments generated from any offered tool's JSON schema, and only for tools the model can call correctly
(issue 13, item 6). The tool list is the one Codex CLI 0.169 offers (descriptions shortened)."""

from __future__ import annotations

import json
from pathlib import Path

from compaction_app.providers.simulated.replies import planned_call, turn_reply
from compaction_app.providers.simulated.tool_arguments import (
    Hints,
    arguments_for,
    callable_tools,
    references_in,
)

CODEX_TOOLS = json.loads((Path(__file__).parents[3] / "fixtures" / "codex_0169_tools.json").read_text())


def _user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _schema(name):
    return callable_tools(CODEX_TOOLS)[name]


def test_namespace_and_web_search_tools_are_never_callable():
    names = callable_tools(CODEX_TOOLS)
    assert "exec_command" in names and "view_image" in names
    assert "multi_agent_v1" not in names
    assert not any(t.get("type") in ("namespace", "web_search") and t.get("name") in names for t in CODEX_TOOLS)


def test_every_required_field_is_filled_with_a_value_of_its_type():
    args = arguments_for(_schema("request_user_input"), Hints(word="parser"))
    (question,) = args["questions"]
    assert {"id", "header", "question", "options"} <= set(question)
    assert all({"label", "description"} <= set(o) for o in question["options"])
    update = arguments_for(_schema("update_goal"), Hints())
    assert update["status"] in _schema("update_goal")["properties"]["status"]["enum"]


def test_exec_command_gets_a_command_that_works_in_an_empty_folder():
    commands = [arguments_for(_schema("exec_command"), Hints(word="docs", n=n))["cmd"] for n in range(3)]
    assert commands == ["ls -a", "printf '%s\\n' 'docs' >> notes.txt", "cat notes.txt"]


def test_a_required_reference_to_something_not_running_makes_the_tool_uncallable():
    assert arguments_for(_schema("write_stdin"), Hints()) is None
    output = {"type": "function_call_output", "call_id": "c1", "output": "Process running with session ID 7\n"}
    hints = Hints(references=references_in([output]))
    assert arguments_for(_schema("write_stdin"), hints) == {"session_id": 7}


def test_with_codex_tools_the_model_calls_exec_command_with_its_required_cmd():
    text = next(t for t in (f"please fix parser bug {n}" for n in range(200))
                if planned_call(CODEX_TOOLS, [_user(t)], t, 0) is not None
                and turn_reply({"input": [_user(t)], "tools": CODEX_TOOLS})[-1]["type"] == "function_call")
    call = turn_reply({"input": [_user(text)], "tools": CODEX_TOOLS})[-1]
    assert call["name"] == "exec_command"
    assert json.loads(call["arguments"])["cmd"]


def test_a_tool_that_cannot_be_satisfied_is_never_called():
    only_stdin = [t for t in CODEX_TOOLS if t.get("name") in ("write_stdin", "multi_agent_v1")]
    for n in range(40):
        out = turn_reply({"input": [_user(f"please fix parser bug {n}")], "tools": only_stdin})
        assert [i["type"] for i in out] == ["message"]


def test_the_answer_reports_what_a_codex_command_did_not_its_bookkeeping_lines():
    text = next(t for t in (f"please fix parser bug {n}" for n in range(200))
                if turn_reply({"input": [_user(t)], "tools": CODEX_TOOLS})[-1]["type"] == "function_call")
    items = [_user(text)]
    for _ in range(6):
        out = turn_reply({"input": items, "tools": CODEX_TOOLS})
        items += out
        calls = [i for i in out if i["type"] == "function_call"]
        if not calls:
            break
        items += [{"type": "function_call_output", "call_id": c["call_id"],
                   "output": "Chunk ID: 1a2b\nWall time: 0.01 seconds\nProcess exited with code 0\nOutput:\nok\n"}
                  for c in calls]
    answer = items[-1]["content"][0]["text"]
    assert "Process exited with code 0" in answer and "Chunk ID" not in answer
