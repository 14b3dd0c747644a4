"""The simulated model's turn replies: deterministic, content-derived tool calls and final answers."""

from __future__ import annotations

import json

from compaction_app.providers.simulated import codec
from compaction_app.providers.simulated.compaction import compaction_item
from compaction_app.providers.simulated.replies import planned_tool_calls, tool_arguments, turn_reply

TOOLS = [{"type": "function", "name": n, "parameters": {}} for n in ("shell", "read_file", "search", "apply_patch")]


def _user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _text_with_calls(predicate, stem="please fix parser bug number"):
    return next(t for t in (f"{stem} {n} in src/parse.py" for n in range(200)) if predicate(planned_tool_calls(t)))


def _run_turn(text, tools=TOOLS, output="ok"):
    """Drive one user turn to its final answer, feeding a canned tool output to every call."""
    items = [_user(text)]
    for _ in range(10):
        out = turn_reply({"input": items, "tools": tools})
        items += out
        calls = [i for i in out if i["type"] == "function_call"]
        if not calls:
            return items, out[-1]
        items += [{"type": "function_call_output", "call_id": c["call_id"], "output": output} for c in calls]
    raise AssertionError("turn did not finish")


def test_same_input_gives_the_same_reply():
    body = {"input": [_user(_text_with_calls(lambda n: n > 0))], "tools": TOOLS}
    assert turn_reply(body) == turn_reply(json.loads(json.dumps(body)))


def test_a_turn_makes_as_many_tool_calls_as_its_hash_plans_then_answers():
    text = _text_with_calls(lambda n: n >= 2)
    items, final = _run_turn(text, output="3 passed in 0.1s")
    calls = [i for i in items if i["type"] == "function_call"]
    assert len(calls) == planned_tool_calls(text)
    assert len({c["call_id"] for c in calls}) == len(calls)
    reasoning = [i for i in items if i["type"] == "reasoning"]
    assert len(reasoning) == len(calls)
    assert all(codec.decode(r["encrypted_content"])["kind"] == "reasoning" for r in reasoning)
    answer = final["content"][0]["text"]
    assert final["role"] == "assistant" and text in answer and "3 passed in 0.1s" in answer
    assert all(c["name"] in answer for c in calls)


def test_no_tools_offered_means_a_direct_answer():
    text = _text_with_calls(lambda n: n > 0)
    (reply,) = turn_reply({"input": [_user(text)], "tools": []})
    assert reply["type"] == "message" and reply["role"] == "assistant"


def test_tool_arguments_are_derived_from_the_user_text():
    text = "the importer in pkg/loader.py crashes"
    assert tool_arguments("read_file", text, 0) == {"path": "pkg/loader.py"}
    assert tool_arguments("shell", text, 0) == {"command": "pytest -q tests/test_loader.py"}
    assert tool_arguments("search", text, 0)["query"] in text
    assert "*** Update File: pkg/loader.py" in tool_arguments("apply_patch", text, 0)["patch"]
    assert tool_arguments("unknown_tool", text, 0) == {}


def test_unknown_tools_are_called_with_empty_arguments():
    text = _text_with_calls(lambda n: n > 0)
    out = turn_reply({"input": [_user(text)], "tools": [{"type": "function", "name": "deploy"}]})
    assert out[-1]["name"] == "deploy" and out[-1]["arguments"] == "{}"


def test_a_later_turn_remembers_goals_from_a_compaction_item():
    old = [_user("migrate the billing tables to postgres")]
    item, _ = compaction_item(old)
    text = _text_with_calls(lambda n: n == 0, stem="now write the docs")
    (reply,) = turn_reply({"input": [item, _user(text)], "tools": TOOLS})
    assert "migrate the billing tables to postgres" in reply["content"][0]["text"]


def test_tool_arguments_follow_the_offered_tools_schema():
    from sessions_app.simulator.scenarios import load_scenario
    from sessions_app.simulator.tools import tool_specs

    specs = tool_specs(load_scenario("fix-failing-test").build_tools(seed=1))
    names = {s["name"] for s in specs}
    text = _text_with_calls(lambda n: n == 4)
    items, _ = _run_turn(text, tools=specs)
    calls = [i for i in items if i["type"] == "function_call" and i["name"] in names]
    assert calls, "the model should call the simulated tools"
    by_name = {s["name"]: s["parameters"] for s in specs}
    for call in calls:
        args = json.loads(call["arguments"])
        declared = by_name[call["name"]]["properties"]
        assert set(args) <= set(declared), f"{call['name']} got {args}"
        assert set(by_name[call["name"]].get("required", [])) <= set(args)
        if declared.get("command", {}).get("type") == "array":
            assert isinstance(args["command"], list)


def test_after_a_mid_turn_compaction_the_model_wraps_up_instead_of_restarting_its_plan():
    text = _text_with_calls(lambda n: n == 4)
    item, _ = compaction_item([_user(text)])
    compacted = [_user(text), item]
    out = turn_reply({"input": compacted, "tools": TOOLS})
    assert [i["type"] for i in out] == ["message"]
    fresh = turn_reply({"input": [_user(text)], "tools": TOOLS})
    assert fresh[-1]["type"] == "function_call"
