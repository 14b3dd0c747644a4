"""The simulated model's extractive summaries differ with the history they summarise."""

from __future__ import annotations

from compaction_app.engine.items import SUMMARY_PREFIX
from compaction_app.providers.simulated import codec
from compaction_app.providers.simulated.compaction import compaction_item
from compaction_app.providers.simulated.summarizer import digest, is_summarization_request, summarize

PROMPT = ("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will "
          "resume the task.")


def _user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _assistant(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _call(call_id, name, args):
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": args}


def _out(call_id, output):
    return {"type": "function_call_output", "call_id": call_id, "output": output}


HISTORY_A = [
    _user("Fix the failing login test in auth/views.py"),
    _call("a1", "shell", '{"command": "pytest -q tests/test_login.py"}'),
    _out("a1", "FAILED tests/test_login.py::test_redirect - AssertionError: 302 != 200"),
    _assistant("The redirect target is wrong; I will change LOGIN_REDIRECT_URL.\nNext: rerun the login tests"),
    _user(PROMPT),
]
HISTORY_B = [
    _user("Add CSV export to reports/export.py"),
    _call("b1", "read_file", '{"path": "reports/export.py"}'),
    _out("b1", "Traceback (most recent call last):\nKeyError: 'rows'"),
    _call("b2", "shell", '{"command": ["bash", "-lc", "python -m reports.export --csv"]}'),
    _out("b2", "ok"),
    _assistant("Export now writes a header row."),
    _user(PROMPT),
]


def test_two_histories_give_different_summaries_naming_their_own_files_commands_and_errors():
    a, b = summarize(HISTORY_A), summarize(HISTORY_B)
    assert a != b
    for fragment in ("Fix the failing login test", "auth/views.py", "tests/test_login.py",
                     "pytest -q tests/test_login.py", "AssertionError: 302 != 200", "rerun the login tests"):
        assert fragment in a and fragment not in b
    for fragment in ("Add CSV export", "reports/export.py", "python -m reports.export --csv", "KeyError: 'rows'",
                     "Export now writes a header row."):
        assert fragment in b and fragment not in a
    assert "CONTEXT CHECKPOINT" not in a  # the prompt itself is not a goal


def test_next_steps_name_an_unresolved_error_and_the_latest_goal():
    history = [_user("Make the build pass"), _call("c", "shell", '{"command": "make"}'),
               _out("c", "error: missing semicolon in main.c")]
    d = digest(history)
    assert any("error: missing semicolon" in s for s in d.next_steps)
    assert any("Make the build pass" in s for s in d.next_steps)


def test_compaction_items_and_old_summaries_are_remembered():
    item, _ = compaction_item(HISTORY_A[:-1])
    assert codec.decode(item["encrypted_content"])["digest"]["goals"] == [
        "Fix the failing login test in auth/views.py"]
    old_summary = _user(SUMMARY_PREFIX + "\n- ported the scheduler to asyncio")
    text = summarize([item, old_summary, _user("Now tidy up"), _user(PROMPT)])
    assert "earlier goal: Fix the failing login test in auth/views.py" in text
    assert "ported the scheduler to asyncio" in text
    assert "auth/views.py" in text and "Now tidy up" in text


def test_summarization_requests_are_recognised_without_tools_only():
    assert is_summarization_request({"input": [_user("hi"), _user(PROMPT)], "tools": []})
    assert is_summarization_request({"input": [_user("Write a short summary of our work for handoff")]})
    assert not is_summarization_request({"input": [_user(PROMPT)], "tools": [{"type": "function", "name": "x"}]})
    assert not is_summarization_request({"input": [_user("fix the bug")]})
