import json
import random

from sessions_app.simulator.distributions import fixed
from sessions_app.simulator.tools import (
    NewContextTool,
    ShellTool,
    dispatch_tool_call,
    function_call_output,
)

TOOLS = {
    "shell": ShellTool(cwd="/home/dev/app", output=fixed(300)),
    "new_context": NewContextTool(),
}


def call(name, arguments, call_id="call_1"):
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def test_function_call_output_has_the_responses_shape():
    assert function_call_output("c9", "ok") == {"type": "function_call_output", "call_id": "c9", "output": "ok"}


def test_dispatch_runs_the_named_tool_and_answers_the_same_call_id():
    item, new_window = dispatch_tool_call(call("shell", json.dumps({"command": ["ls"]}), "c7"), TOOLS,
                                          random.Random(1))
    assert item["type"] == "function_call_output" and item["call_id"] == "c7"
    assert item["output"].startswith("Exit code: 0\n")
    assert new_window is False


def test_dispatch_reports_a_new_window_request_from_new_context():
    item, new_window = dispatch_tool_call(call("new_context", "{}"), TOOLS, random.Random(1))
    assert new_window is True and item["call_id"] == "call_1"


def test_unknown_tool_answers_unsupported_call():
    item, new_window = dispatch_tool_call(call("browser", "{}"), TOOLS, random.Random(1))
    assert item == function_call_output("call_1", "unsupported call: browser")
    assert new_window is False


def test_bad_json_arguments_answer_an_error_instead_of_raising():
    item, _ = dispatch_tool_call(call("shell", "{not json"), TOOLS, random.Random(1))
    assert item["output"].startswith("failed to parse function arguments: ")
    item, _ = dispatch_tool_call(call("shell", "[1, 2]"), TOOLS, random.Random(1))
    assert item["output"] == "failed to parse function arguments: expected a JSON object"


def test_missing_arguments_answer_an_error_naming_the_tool():
    item, _ = dispatch_tool_call(call("shell", "{}"), TOOLS, random.Random(1))
    assert item["output"].startswith("shell: invalid arguments: ") and "command" in item["output"]


def test_dispatch_is_deterministic_for_the_same_rng_seed():
    item = call("shell", json.dumps({"command": "pytest"}))
    assert dispatch_tool_call(item, TOOLS, random.Random(4)) == dispatch_tool_call(item, TOOLS, random.Random(4))


def test_odd_model_supplied_values_never_raise():
    for workdir in ("/home/dev/{0}{x}", 42, None):
        args = json.dumps({"command": "pytest", "workdir": workdir})
        item, _ = dispatch_tool_call(call("shell", args), TOOLS, random.Random(1))
        assert item["output"].startswith("Exit code: ")
