"""facts.py: what a history's items say, read through `score_compaction` where that is cheap. Written from the
survivors of the retention room's mutation samples (issue 43); each test fails with its mutant planted."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind, call_text, output_body, short_output_values
from compaction_app.engine.retention.score import carried_facts, score_compaction
from tests.compaction_app.engine.retention.labelled_set import AGENTS, assistant, exec_out, fcall, fout


def summary(*lines: str) -> dict:
    return user_message(SUMMARY_PREFIX + "\n" + "\n".join(lines))


def verdicts(history: list[dict], *lines: str, kind: FactKind) -> dict[str, bool]:
    """Each fact of `kind` of `history`, by its text, and whether a window that is the summary `lines` keeps it."""
    result = score_compaction([AGENTS, *history], [AGENTS, summary(*lines)])
    return {v.fact.text: v.kept for v in result.verdicts if v.fact.kind is kind}


@pytest.mark.parametrize("argument", ["path", "file_path"])
def test_an_edit_tool_sent_no_patch_changes_the_file_its_path_names(argument):
    edit = [fcall("w", "write_file", **{argument: "src/billing/totals.py", "content": "ROUNDING = 'HALF_UP'\n"}),
            fout("w", "Wrote 1 file.")]
    assert verdicts(edit, "- src/billing/totals.py now rounds half up", kind=FactKind.FILE_CHANGED) == \
        {"src/billing/totals.py": True}
    assert verdicts(edit, "- the rounding was changed", kind=FactKind.FILE_CHANGED) == {"src/billing/totals.py": False}


def test_a_patch_a_shell_command_applies_with_escaped_newlines_changes_the_files_it_names():
    # The command as some clients log a heredoc: one line, its newlines written `\n`.
    patch = "apply_patch <<'EOF'\\n*** Begin Patch\\n*** Update File: src/pay/refund.py\\n@@\\n-a\\n+b\\n" \
            "*** Add File: src/pay/refund_test.py\\n+x\\n*** End Patch\\nEOF"
    history = [fcall("p", "exec_command", cmd=patch), fout("p", exec_out(0, "Success. Updated the following files"))]
    assert verdicts(history, "- patched src/pay/refund.py, added src/pay/refund_test.py",
                    kind=FactKind.FILE_CHANGED) == {"src/pay/refund.py": True, "src/pay/refund_test.py": True}


@pytest.mark.parametrize("call", ["exec_command", "local_shell"])
def test_a_patch_a_shell_heredoc_applies_with_real_newlines_changes_the_files_it_names(call):
    # The heredoc as a shell tool sends it: its lines are real lines, and `*** Update File:` starts one.
    script = ("apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/pay/refund.py\n@@\n-a\n+b\n"
              "*** Add File: src/pay/refund_test.py\n+x\n*** End Patch\nEOF\n")
    if call == "exec_command":
        sent = fcall("p", "exec_command", cmd=script)
    else:
        sent = {"type": "local_shell_call", "call_id": "p", "status": "completed",
                "action": {"type": "exec", "command": ["bash", "-lc", script]}}
    history = [sent, fout("p", exec_out(0, "Success. Updated the following files"))]
    assert verdicts(history, "- patched src/pay/refund.py, added src/pay/refund_test.py",
                    kind=FactKind.FILE_CHANGED) == {"src/pay/refund.py": True, "src/pay/refund_test.py": True}
    assert verdicts(history, "- patched the refund module", kind=FactKind.FILE_CHANGED) == \
        {"src/pay/refund.py": False, "src/pay/refund_test.py": False}


def test_a_score_stored_before_facts_had_anchors_still_carries_its_facts_by_kind():
    # A stored fact without "anchors" is read again from its text; its kind decides its category and its key.
    stored = {"score": 1.0, "facts": [
        {"kind": "error", "text": "make: *** [deploy] missing target region eu-west-9",
         "question": "Which errors were seen?"},
        {"kind": "file_read", "text": "src/billing/totals.py", "question": "Which files were read?"},
    ]}
    carried = carried_facts(stored)
    assert [(f.kind, f.anchors) for f in carried] == [(FactKind.ERROR, ("eu-west-9",)),
                                                     (FactKind.FILE_READ, ("src/billing/totals.py",))]
    window = [summary("- read src/billing/totals.py")]
    second = score_compaction(window, window, carried=carried)
    assert {v.fact.kind: v.kept for v in second.verdicts} == {FactKind.ERROR: False, FactKind.FILE_READ: True}


def test_a_function_call_says_its_tools_name_beside_its_arguments():
    said = call_text(fcall("c", "get_pool_config", pool="orders-7"))
    assert said.split()[0] == "get_pool_config" and '"pool": "orders-7"' in said


def test_a_custom_tool_call_sent_without_input_says_its_name_alone():
    assert call_text({"type": "custom_tool_call", "call_id": "c", "name": "apply_patch"}).split() == ["apply_patch"]


def crontab(lines: int) -> list[dict]:
    schedule = "\n".join(f"{7 + i} * * * /srv/jobs/sync-{i}.sh" for i in range(1, lines + 1))
    return [fcall("t", "exec_command", cmd="crontab -l"), fout("t", exec_out(0, schedule))]


def test_only_an_output_of_at_most_four_lines_states_each_of_its_lines_values_as_a_fact():
    # Four lines were asked for what they say; a longer output is a listing, its values facts only once used.
    # One fact a line, in order: the summary keeps the first line's schedule and no other.
    assert list(verdicts(crontab(4), "- sync-1.sh runs at 08 past the hour", kind=FactKind.VALUE).values()) == \
        [True, False, False, False]
    assert verdicts(crontab(5), "- sync-1.sh runs at 08 past the hour", kind=FactKind.VALUE) == {}


def test_every_stored_fact_says_which_question_it_answers():
    # A command that succeeded and printed nothing is its effect; its fact, like every other, carries its question
    # into the stored score (carried to the next compaction).
    history = [user_message("Rename the ledger module to ledger_v2 and run the tests."),
               fcall("m", "exec_command", cmd="git mv src/billing/ledger.py src/billing/ledger_v2.py"),
               fout("m", exec_out(0, "")),
               fcall("t", "exec_command", cmd="pytest -q tests/billing"),
               fout("t", exec_out(1, "FAILED tests/billing/test_ledger.py::test_import - ImportError\n1 failed")),
               assistant("Next step: fix the import in tests/billing/test_ledger.py")]
    stored = score_compaction([AGENTS, *history], [AGENTS, summary("- renamed the ledger")]).to_dict()["facts"]
    assert any(f["text"].endswith("(exit 0, no output)") for f in stored)
    assert [f["text"] for f in stored if not isinstance(f["question"], str) or not f["question"]] == []


def test_a_value_whose_call_left_the_history_earlier_says_it_came_from_a_tool():
    # The output of a call an earlier compaction dropped: no command and no tool name to say where it came from.
    orphan = [fout("gone", exec_out(0, "4b1c9e2f7a"))]
    assert list(verdicts(orphan, "- HEAD is 4b1c9e2f7a", kind=FactKind.VALUE)) == \
        ["4b1c9e2f7a (from the output of `a tool`)"]


def test_a_json_tool_output_after_leading_whitespace_is_read_as_its_output_field():
    assert output_body('\n  {"output": "Wrote 3 rows\\n", "metadata": {"exit_code": 0}}') == ["Wrote 3 rows"]


def test_the_next_step_is_judged_by_the_whole_last_ask_not_its_displayed_opening():
    # The fact's text shows the ask's first 80 characters; what identifies it (batch 7731) may come after them.
    ask = ("Please look into why the nightly ledger export to the finance bucket keeps failing and fix the retry "
           "of refund batch 7731")
    history = [user_message(ask), assistant("Looking.")]
    assert list(verdicts(history, "- next: fix the retry of refund batch 7731", kind=FactKind.NEXT_STEP).values()) \
        == [True]
    assert list(verdicts(history, "- next: look at the export", kind=FactKind.NEXT_STEP).values()) == [False]


@pytest.mark.parametrize(("command", "output", "values"), [
    ("wc -l runs/7731", "12 runs/7731", [("wc output", "12", "12 runs/7731")]),
    ("ls -d jobs/7731", "jobs/7731", []),
])
def test_a_short_output_leaves_out_the_path_its_call_named_by_its_numbered_last_part(command, output, values):
    # `runs/7731` is read as its last part `7731`; the call named the whole path, so the output did not state it.
    assert short_output_values(output, command, set(), command) == values


def test_a_short_output_value_is_stored_with_the_values_anchors_not_its_name_and_file():
    # The stored score lists what identifies each fact; a short output's value is judged by its setting and value
    # (`jq output` in package.json), so its anchors are the value's alone, not the name and file around it.
    history = [fcall("j", "exec_command", cmd="jq -r .engines.node services/portal-8/package.json"),
               fout("j", exec_out(0, ">=20.11 <23"))]
    stored = score_compaction([AGENTS, *history], [AGENTS, summary("- checked the engines")]).to_dict()["facts"]
    assert [(f["anchors"], f["words"]) for f in stored if f["kind"] == FactKind.VALUE.value] == [(["20.11", "23"], [])]
