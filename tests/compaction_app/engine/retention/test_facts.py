"""facts.py: what a history's items say. The first tests were written from the survivors of the retention room's
mutation samples (issue 43), read through `score_compaction` where that is cheap; the rest state each reader's rule
directly, with its boundaries."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import (
    SHORT_OUTPUT_QUESTION,
    Category,
    FactKind,
    ProbeFact,
    arguments,
    call_text,
    changed_paths,
    command_of,
    command_reads,
    error_lines,
    exit_code,
    extract_facts,
    failure_location,
    item_key,
    left_items,
    line_flag,
    needle,
    output_body,
    output_text,
    place_in,
    read_path,
    short_output_values,
    sole_value,
    source_of,
    used_values,
)
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


# The readers of facts.py, each rule with its boundaries.

def test_a_needle_is_the_normalised_text_cut_at_a_word_before_its_limit():
    assert needle("Short  `Text`") == "short text"
    assert needle("word " * 30) == ("word " * 16).strip()  # 80 characters end inside the 17th word
    assert needle("x" * 100) == "x" * 80  # no space to cut at
    assert needle("a" * 39 + " " + "b" * 40) == "a" * 39 + " " + "b" * 40  # exactly its limit: whole


def test_an_items_key_survives_reserialisation_and_tells_apart_what_differs():
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert item_key(message) == "message:user:hi"
    assert item_key(fcall("c", "x")) == 'function_call:c:"{}"'
    assert item_key(fout("c", "o")) == 'function_call_output:c:"o"'
    assert item_key({"type": "custom_tool_call", "call_id": "c", "input": "i"}) == 'custom_tool_call:c:"i"'
    assert item_key({"type": "local_shell_call", "call_id": "c", "action": {"command": ["ls"]}}) == \
        'local_shell_call:c:{"command": ["ls"]}'
    assert item_key({"type": "reasoning", "b": 1, "a": 2}) == '{"a": 2, "b": 1, "type": "reasoning"}'


def test_the_items_that_left_are_a_multiset_difference_in_order():
    call, other = fcall("c", "x"), fcall("d", "y")
    assert left_items([call, other, call], [call]) == [other, call]
    assert left_items([call], [call, call]) == []


@pytest.mark.parametrize(("raw", "parsed", "kept"), [
    ({"a": 1}, {"a": 1}, {"a": 1}),
    ('{"a": 1}', {"a": 1}, {"a": 1}),
    ("not json", {}, {"raw": "not json"}),
    ("[1, 2]", {}, {"value": [1, 2]}),
    (None, {}, {}),
    ("", {}, {}),
])
def test_a_calls_arguments_are_an_object_or_kept_unparsed_for_a_reader_that_scans_them(raw, parsed, kept):
    assert arguments({"arguments": raw}) == parsed
    assert arguments({"arguments": raw}, keep_unparsed=True) == kept


@pytest.mark.parametrize(("item", "command"), [
    (fcall("c", "exec_command", cmd="ls  -la\n x"), "ls -la x"),
    (fcall("c", "shell", command=["bash", "-lc", "echo hi"]), "echo hi"),
    (fcall("c", "shell", command=["ls", "-la"]), "ls -la"),
    ({"type": "local_shell_call", "action": {"command": ["bash", "-c", "make"]}}, "make"),
    (fcall("c", "read_file", path="a.py"), None),
    (fcall("c", "shell", command=""), None),
])
def test_a_shell_calls_command_line_is_unwrapped_and_its_whitespace_collapsed(item, command):
    assert command_of(item) == command


@pytest.mark.parametrize(("output", "text"), [
    ("text", "text"),
    ([{"text": "a"}, {"text": "b"}, "x"], "a\nb"),
    ({"output": "x", "metadata": {"exit_code": 0}}, '{"output": "x", "metadata": {"exit_code": 0}}'),
    (None, ""),
    (5, "5"),
])
def test_an_outputs_text_is_read_from_each_shape_a_tool_writes(output, text):
    assert output_text({"output": output}) == text


def test_a_calls_text_is_its_name_with_its_command_or_input():
    assert call_text({"type": "custom_tool_call", "name": "apply_patch", "input": "X"}) == "apply_patch X"
    assert call_text({"type": "local_shell_call", "action": {"command": ["ls"]}}) == "local_shell ls"
    assert call_text(fcall("c", "shell", cmd="ls")) == 'shell ls {"cmd": "ls"}'


@pytest.mark.parametrize(("item", "path"), [
    (fcall("c", "read_file", path="a.py"), "a.py"),
    (fcall("c", "view", file="b.py"), "b.py"),
    (fcall("c", "cat", file_path="c.py"), "c.py"),
    (fcall("c", "shell", path="a.py"), None),  # not a read tool
    (fcall("c", "read_file"), None),
])
def test_a_read_tool_reads_the_file_its_path_names(item, path):
    assert read_path(item) == path


@pytest.mark.parametrize(("command", "paths"), [
    ("cat src/a.py", ["src/a.py"]),
    ("sed -n 1,80p src/a.py | head -5 x.txt", ["src/a.py", "x.txt"]),  # each step of a pipeline
    ("rg foo src/ && wc -l a/b.c", ["src/", "a/b.c"]),
    ("/bin/cat a.py > out.txt", ["a.py"]),  # not what it writes to
    ("grep -r x --include=*.py src/a.py", ["src/a.py"]),  # not an option or a glob
    ("cat -n a.py a.py", ["a.py"]),
    ('head "unterminated a.py', ["a.py"]),  # a quote shlex cannot close
    ("tail -f logs/app.log; ls", ["logs/app.log"]),
    ("echo a.py", []),  # not a reading program
    ("cat http://x/y.py", []),
    ("cat README", []),  # no folder and no extension
])
def test_a_shell_command_reads_the_path_arguments_of_its_reading_programs(command, paths):
    assert command_reads(command) == paths


PATCH = "*** Begin Patch\n*** Update File: src/a.py\n@@\n*** Add File: src/b.py\n*** Delete File: old.py\n*** End Patch"


@pytest.mark.parametrize(("item", "paths"), [
    ({"type": "custom_tool_call", "input": PATCH}, ["src/a.py", "src/b.py", "old.py"]),
    (fcall("c", "apply_patch", input=PATCH), ["src/a.py", "src/b.py", "old.py"]),
    (fcall("c", "apply_patch", patch=PATCH), ["src/a.py", "src/b.py", "old.py"]),
    (fcall("c", "write_file", path="x.py"), ["x.py"]),
    (fcall("c", "edit_file", file_path="y.py"), ["y.py"]),
    (fcall("c", "read_file", path="x.py"), []),
    (fcall("c", "shell", cmd='echo "*** Update File: z.py"'), []),  # no apply_patch in the script
    (fcall("c", "shell", cmd=f"apply_patch <<EOF\n{PATCH}\nEOF"), ["src/a.py", "src/b.py", "old.py"]),
])
def test_a_call_changes_the_files_its_patch_names_or_its_edit_tools_path(item, paths):
    assert changed_paths(item) == paths


@pytest.mark.parametrize(("output", "code"), [
    ("Exit code: 1\nOutput:\nx", 1), ("Process exited with code -9", -9), ('{"exit_code": 2}', 2),
    ("x\nExit code: 0", 0), ("none", None), ("  Exit code: 3", None),  # the header starts its line
])
def test_an_outputs_exit_code_is_read_from_each_header_form(output, code):
    assert exit_code(output) == code


def test_an_outputs_body_leaves_out_its_header_blank_lines_and_a_measurements_spread():
    output = ("Chunk ID: a1\nWall time: 0.1 seconds\nProcess exited with code 0\nOriginal token count: 5\n"
              "Output:\nline one\n\n  331.4 ms \u00b1  9.3 ms  \nTotal output lines: 3")
    assert output_body(output) == ["line one", "331.4 ms"]
    assert output_body('{"x": 1}') == ['{"x": 1}']  # JSON without an output field is the body itself
    assert output_body("{bad") == ["{bad"]


@pytest.mark.parametrize(("line", "place"), [
    ("src/billing/totals.py:212: AssertionError", "src/billing/totals.py:212"),
    ("src/a.c:12:5: error: x", "src/a.c:12"),
    ("src/a.ts(12,5): error TS2345", "src/a.ts:12"),
    ('  File "src/a.py", line 212, in f', "src/a.py:212"),
    ("    at f (src/a.js:12:5)", "src/a.js:12"),
    ("a.py:1 then b.py:2", "b.py:2"),  # the last place of a line
    ("FAILED tests/a.py::test_x - boom", None),  # a test's id is no place
    ("x.py:12::y", None),
    ("no place here", None),
])
def test_a_place_is_a_path_and_line_in_any_of_its_forms(line, place):
    assert place_in(line) == place


TRACEBACK = ('Traceback (most recent call last):\n  File "src/app.py", line 10, in main\n'
             '  File "src/lib.py", line 20, in f\nValueError: bad')
JAVA = ("Exception in thread main java.lang.NullPointerException\n"
        "\tat java.base/java.util.Objects.requireNonNull(Objects.java:233)\n"
        "\tat com.acme.Billing.total(Billing.java:42)\n\tat com.acme.Main.main(Main.java:7)")
GO = ("panic: boom\n\ngoroutine 7 [running]:\nmain.f()\n\t/usr/local/go/src/runtime/panic.go:12 +0x1a4\n"
      "\t/src/internal/merge/merge.go:220 +0x1a4")


def test_a_failure_is_located_at_the_innermost_frame_of_the_programs_own_code():
    assert failure_location(TRACEBACK, 1) == ('File "src/lib.py", line 20, in f', "src/lib.py:20")  # listed last
    assert failure_location(JAVA, 1) == ("at com.acme.Billing.total(Billing.java:42)", "Billing.java:42")
    assert failure_location(GO, 2) == ("/src/internal/merge/merge.go:220 +0x1a4", "/src/internal/merge/merge.go:220")


def test_a_command_that_did_not_fail_or_names_no_place_has_no_failure_location():
    assert failure_location(TRACEBACK, 0) is None
    assert failure_location(TRACEBACK, None) is None
    assert failure_location("no places\nat all", 1) is None


@pytest.mark.parametrize(("output", "code", "lines"), [
    ("ok\nError: first\nmiddle\nfatal: last", 1, ["Error: first", "fatal: last"]),  # the first and the last
    ("only one error here", 1, ["only one error here"]),
    ("a\nb\nc", 2, ["c"]),  # a failure with no failure line ends with its last line
    ("a\nb", 0, []),
    ("", 1, []),
    ("Error: a\njava.sql.SQLException: ORA-00942: table missing\nError: b\nError: c", 1,
     ["Error: a", "Error: c", "java.sql.SQLException: ORA-00942: table missing"]),  # and one naming its code
    ("NAME   READY   STATUS   RESTARTS\nrefund-api-7d9f   0/1   OOMKilled   3\nweb-1   1/1   Running   0", 1,
     ["refund-api-7d9f OOMKilled"]),  # a table's row by its name and failing cells
])
def test_an_outputs_failure_lines_are_its_first_and_last_and_one_with_a_code(output, code, lines):
    assert error_lines(output, code) == lines


@pytest.mark.parametrize(("output", "value"), [
    ("abc1234def\n", "abc1234def"), ("Exit code: 0\nOutput:\nv20.11.1", "v20.11.1"), ("1234", "1234"),
    ('"i-0abc123"', "i-0abc123"), ("123", None), ("two words", None), ("a\nb", None), ("x", None),
])
def test_an_output_of_one_distinctive_token_is_that_value(output, value):
    assert sole_value(output) == value


@pytest.mark.parametrize(("output", "call", "known", "values"), [
    ("1.2G\tdata/x", "du -sh data/x", set(), [("du output", "1.2G", "1.2G")]),
    ("5 3 * * * /opt/nightly.sh", "crontab -l", set(), [("crontab output", "5 ; 3", "5 3 * * * /opt/nightly.sh")]),
    (" count\n-------\n 4093\n(1 row)", "psql -c x", set(), [("count", "4093", "4093")]),  # under its header
    ("rev 7731", "git x", set(), [("rev", "7731", "rev 7731")]),
    ("listening on 0.0.0.0:18001 since 2027-03-14, 512 MiB, id abc123", "serve", set(),
     [("on", "0.0.0.0:18001", "0.0.0.0:18001"), ("since", "2027-03-14", "2027-03-14"),
      ("listening", "512 MiB", "512 MiB"), ("id", "abc123", "abc123")]),  # a line of more values: each by its form
    ("total 5", "x", {"5"}, []),  # already a fact
    ("port = 5432", "cat a.conf", set(), []),  # a named value is a setting's
    ("a\nb\nc\nd\ne", "x", set(), []),  # five lines are a listing
    ("NAME  AGE\na  1", "k", set(), []),  # a table's cells are the table reader's
    ("", "x", set(), []),
])
def test_a_short_outputs_unnamed_values_are_facts_named_by_the_word_before_them(output, call, known, values):
    assert short_output_values(output, call, known, call) == values


def test_a_fact_is_identified_by_its_kind_and_text_or_a_setting_by_its_source_and_name():
    setting = ProbeFact.of(FactKind.VALUE, "port = 5 (in a.conf)", "q", subject="A.conf", setting="port", value="5")
    assert (setting.key, setting.category, setting.weight) == ("value:setting:a.conf:port", Category.ARTIFACT_TRAIL, 1)
    # a short output's value is one fact per value: another value is another fact, not a newer one
    short = ProbeFact.of(FactKind.VALUE, "x", SHORT_OUTPUT_QUESTION, subject="a.conf", setting="port", value="5 MiB")
    assert short.key == "value:setting:a.conf:port=5 mib"
    goal = ProbeFact.of(FactKind.GOAL, "Fix  THE bug", "q")
    assert (goal.key, goal.category, goal.weight) == ("goal:fix the bug", Category.RECALL, 3)


def test_a_fact_stored_and_read_back_is_the_same_fact():
    setting = ProbeFact.of(FactKind.VALUE, "port = 5 (in a.conf)", "q", subject="a.conf", setting="port", value="5")
    stored = setting.to_dict()
    assert (stored["setting"], stored["value"], stored["category"], stored["weight"]) == ("port", "5",
                                                                                          "artifact_trail", 1)
    assert "row" not in stored
    assert ProbeFact.from_dict(stored) == setting
    row = ProbeFact(kind=FactKind.VALUE, text="t", question="q", row=("1", "2"), row_name="x")
    assert row.to_dict()["row"] == ["1", "2"] and ProbeFact.from_dict(row.to_dict()) == row
    assert "setting" not in ProbeFact.of(FactKind.GOAL, "g", "q").to_dict()


@pytest.mark.parametrize(("call", "source"), [
    (None, "a tool"),
    (fcall("c", "read_file", path="conf/a.toml"), "conf/a.toml"),
    (fcall("c", "exec_command", cmd="cat ./.env conf/b.ini"), "conf/b.ini"),  # the last file read, not a dotfile
    (fcall("c", "exec_command", cmd="cat ./.env"), "cat ./.env"),  # else the command line
    (fcall("c", "get_config"), "get_config"),  # else the tool's name
    ({"type": "function_call", "arguments": "{}"}, "a tool"),
])
def test_an_outputs_settings_live_in_the_file_its_call_read_else_its_command_else_its_tool(call, source):
    assert source_of(call) == source


def facts_of(items: list[dict], context: list[dict] | None = None) -> list[tuple[str, str]]:
    return [(f.kind.value, f.text) for f in extract_facts(items, context)]


def test_a_users_message_is_a_goal_and_each_sentence_that_restricts_or_sets_a_measure_a_constraint():
    facts = facts_of([user_message("Fix the refund retry. Never touch prod-20. Keep it under 30% CPU.")])
    assert facts == [("goal", "Fix the refund retry. Never touch prod-20. Keep it under 30% CPU."),
                     ("constraint", "Never touch prod-20."), ("constraint", "Keep it under 30% CPU."),
                     ("next_step", "continue: fix the refund retry. never touch prod-20. keep it under 30% cpu.")]
    assert facts_of([user_message("   ")]) == []
    long = extract_facts([user_message("word " * 200)])
    assert [(f.kind, len(f.text)) for f in long] == [(FactKind.GOAL, 600), (FactKind.NEXT_STEP, 89)]  # capped


def test_the_agents_next_step_lines_are_steps_and_its_conclusions_outside_bullets_decisions():
    said = assistant("Next step: rerun tests/pay/test_refund.py\nWe decided to use Celery instead of Redis.\n"
                     "- because of a bullet\nTODO: update docs/pay.md\n- [ ] tag the release\nplain line")
    assert facts_of([said]) == [("next_step", "rerun tests/pay/test_refund.py"),
                                ("decision", "We decided to use Celery instead of Redis."),
                                ("next_step", "update docs/pay.md"), ("next_step", "tag the release")]


def test_a_calls_files_and_its_command_are_facts_and_how_it_exited_is_the_commands():
    history = [fcall("r", "read_file", path="src/pay/refund.py"), fout("r", "def refund(): ..."),
               fcall("e", "exec_command", cmd="git mv src/a.py src/b.py"), fout("e", exec_out(0, "")),
               fcall("c", "exec_command", cmd="cat conf/app.toml"), fout("c", exec_out(0, "debug = on")),
               fcall("p", "apply_patch", input="*** Begin Patch\n*** Update File: src/pay/refund.py\n*** End Patch"),
               fcall("n", "exec_command", cmd="ls src/pay")]
    facts = extract_facts(history)
    assert [(f.kind.value, f.text, f.status) for f in facts] == [
        ("file_read", "src/pay/refund.py", None),
        ("command", "git mv src/a.py src/b.py (exit 0, no output)", None),  # its effect, stated by its values
        ("file_read", "conf/app.toml", None),
        ("command", "exit 0 of cat conf/app.toml", 0),
        ("file_changed", "src/pay/refund.py", None),
        ("command", "ls src/pay", None),  # no output yet: no status
    ]
    assert facts[1].anchors == ("src/a.py", "src/b.py") and facts[1].subject == "git mv src/a.py src/b.py"
    assert facts[1].words == ()  # an effect is stated by its values, whatever the verb
    # A quiet success with no value to state its effect by is a command with its status.
    quiet = extract_facts([fcall("m", "exec_command", cmd="make clean"), fout("m", exec_out(0, ""))])
    assert [(f.text, f.status) for f in quiet] == [("exit 0 of make clean", 0)]


def test_a_failed_commands_failure_lines_and_the_place_it_was_raised_are_errors():
    history = [fcall("t", "exec_command", cmd="pytest -q tests/pay"),
               fout("t", exec_out(1, "src/pay/refund.py:42: AssertionError\nE   assert 1 == 2"))]
    errors = [(f.text, f.anchors) for f in extract_facts(history) if f.kind is FactKind.ERROR]
    assert errors == [("src/pay/refund.py:42: AssertionError", ("src/pay/refund.py:42",)),
                      ("E assert 1 == 2", ()),
                      ("src/pay/refund.py:42: AssertionError (raised at src/pay/refund.py:42)",
                       ("src/pay/refund.py:42",))]


def test_an_output_whose_call_stayed_in_the_window_still_gives_its_errors():
    call, output = fcall("t", "exec_command", cmd="make build"), fout("t", exec_out(2, "make: *** [build] Error 2"))
    assert ("error", "make: *** [build] Error 2") in facts_of([output], context=[call, output])


def test_a_setting_is_one_fact_at_its_latest_value_in_the_history():
    history = [fcall("c", "exec_command", cmd="cat conf/app.toml"), fout("c", exec_out(0, "listen_port = 19000")),
               fcall("d", "exec_command", cmd="cat conf/app.toml"), fout("d", exec_out(0, "listen_port = 19001"))]
    (value,) = [f for f in extract_facts(history[:2], context=history) if f.kind is FactKind.VALUE]
    assert (value.text, value.setting, value.value, value.subject, value.anchors) == (
        "listen_port = 19001 (in conf/app.toml)", "listen_port", "19001", "conf/app.toml", ("19001",))


def test_an_outputs_values_are_facts_when_the_agent_used_them_later():
    output = "created order ord_4801 for ACC-99001 ACC-99002 ACC-99003\n" + "\n".join(f"line {i}" for i in range(5))
    history = [fcall("k", "exec_command", cmd="./create-order"), fout("k", exec_out(0, output)),
               assistant("refunding ord_4801, ACC-99001, ACC-99002 and ACC-99003 next")]
    assert facts_of(history[:2], context=history) == [
        ("value", "ord_4801 (from the output of `./create-order`)"),
        ("value", "ACC-99001 (from the output of `./create-order`)"),
        ("value", "ACC-99002 (from the output of `./create-order`)")]  # at most three an output
    assert facts_of(history[:2], context=history[:2]) == []  # never used
    assert facts_of(history[1:2], context=[history[2], *history[:2]]) == []  # used only before it was seen


def test_the_same_fact_twice_is_one_fact_as_first_seen():
    assert facts_of([fcall("x", "exec_command", cmd="ls src"), fcall("y", "exec_command", cmd="ls  src")]) == \
        [("command", "ls src")]
    # One failure line under two commands: proved by what it adds to the first (its path), not the second's form.
    line = "FileNotFoundError: data/raw/x.parquet missing"
    history = [fcall("a", "exec_command", cmd="python run.py"), fout("a", exec_out(1, line)),
               fcall("b", "exec_command", cmd="python run.py data/raw/x.parquet"), fout("b", exec_out(1, line))]
    errors = [f for f in extract_facts(history) if f.kind is FactKind.ERROR and f.text == line]
    assert [(f.anchors, f.words) for f in errors] == [(("data/raw/x.parquet",), ())]


def test_a_command_line_option_in_a_failure_line_is_no_value_of_the_failure():
    # Issue 43, retention seed 5103: `--Rebuild` is an option whatever its case; the failure is about image-7 alone
    # only when the option is read as one, else the line is proved by its words and both anchors.
    assert line_flag("Error: --Rebuild needs image-7", "rebuild")
    assert not line_flag("Error: --rebuild needs image-7", "image-7")
    history = [fcall("m", "exec_command", cmd="make images"), fout("m", exec_out(2, "error: --rebuild needs image-7"))]
    assert [(f.anchors, f.words) for f in extract_facts(history) if f.kind is FactKind.ERROR] == \
        [(("rebuild", "image-7"), ("error", "rebuild", "need"))]


def test_a_local_shell_call_without_a_command_says_its_tools_name_alone():
    # Issue 43, retention seed 5103: no placeholder for the missing command.
    assert call_text({"type": "local_shell_call", "call_id": "c", "action": {}}).split() == ["local_shell"]


def test_a_python_traceback_is_located_at_its_last_place_even_when_it_quotes_a_first_frame_first_stack():
    # Issue 43, retention seed 5102: a Python tool that ran node prints node's stack inside its own traceback; the
    # Python traceback ("most recent call last") still ends at its innermost frame.
    output = ("Traceback (most recent call last):\n  File \"src/build.py\", line 10, in main\n"
              "RuntimeError: node failed\nat run (scripts/build.js:12:5)\n\nDuring handling of the above:\n"
              "Traceback (most recent call last):\n  File \"src/lib.py\", line 30, in g\nKeyError: 'x'")
    assert failure_location(output, 1) == ('File "src/lib.py", line 30, in g', "src/lib.py:30")


def test_a_one_line_output_without_a_digit_is_no_header_and_its_values_are_read():
    # Issue 43, retention seed 5102: a header names the columns of the lines under it; one line has none under it.
    url = "https://grafana.example.com/d/abc"
    assert [v for _, v, _ in short_output_values(url, "printenv DASHBOARD_URL", set(), "printenv")] == [url]


def test_each_fact_is_stored_with_the_question_of_its_kind():
    # Issue 43, retention seeds 5102 and 5103: the question is what the model-judged probe and a stored score show.
    history = [assistant("Next step: rerun tests/pay"), fcall("r", "read_file", path="src/a.py"), fout("r", "x"),
               fcall("t", "exec_command", cmd="pytest -q tests/pay"), fout("t", exec_out(1, "1 failed"))]
    assert [(f.kind.value, f.question) for f in extract_facts(history)] == [
        ("next_step", "What is the next step?"), ("file_read", "Which files were read?"),
        ("command", "Which commands were run, and how did they exit?"), ("error", "Which errors were seen?"),
        ("value", SHORT_OUTPUT_QUESTION)]


def test_a_short_outputs_value_is_named_after_the_program_its_command_ran_by_path():
    assert short_output_values("1.2G\tdata/x", "du -sh data/x", set(), "/usr/bin/du -sh data/x") == \
        [("du output", "1.2G", "1.2G")]


def test_a_failure_lines_identifiers_its_command_already_named_do_not_prove_it_alone():
    # Issue 43, retention seed 5102: the order was the command's own argument, so the line adds one identifier only
    # and is proved by its words too; read without its command, both identifiers would prove it in any words.
    history = [fcall("p", "exec_command", cmd="./pay --order ord_77"),
               fout("p", exec_out(1, "error: ord_77 declined by card_9"))]
    assert [(f.anchors, f.words) for f in extract_facts(history) if f.kind is FactKind.ERROR] == \
        [(("ord_77", "card_9"), ("error", "declin"))]


def test_a_known_value_no_value_of_a_line_holds_nor_is_held_by_leaves_the_line_one_fact():
    # Issue 43, retention seed 5103: a value already a fact keeps a line from being a catch-all only when one of
    # the line's values is part of it or holds it; an unrelated known value (a port used elsewhere) does not.
    assert short_output_values("5 3 * * * /opt/nightly.sh", "crontab -l", {"18001"}, "crontab -l") == \
        [("crontab output", "5 ; 3", "5 3 * * * /opt/nightly.sh")]


def test_a_value_after_a_shell_redirection_is_named_by_the_word_before_it():
    # Issue 43, retention seed 5103: the redirection is blanked where it stands, so the value's offset is still its
    # offset in the line (blanked by one space, `2>&1 ` moved `42` three characters left and named it `tot`).
    assert short_output_values("exec 2>&1 total 42", "run", set(), "run") == [("total", "42", "exec 2>&1 total 42")]


def test_a_short_outputs_typed_value_its_call_named_is_left_out():
    # Issue 43, retention seed 5103: the address the call was given is not stated by the output; the date is.
    assert short_output_values("listening on 0.0.0.0:18001 since 2027-03-14", "serve --bind 0.0.0.0:18001", set(),
                               "serve --bind 0.0.0.0:18001") == [("since", "2027-03-14", "2027-03-14")]


def test_a_short_outputs_typed_value_stated_twice_is_one_fact():
    assert short_output_values("started 2027-03-14 on 0.0.0.0:18001\nstopped 2027-03-14", "status", set(),
                               "status") == [("started", "2027-03-14", "2027-03-14"),
                                             ("on", "0.0.0.0:18001", "0.0.0.0:18001")]


def test_a_failing_rows_name_and_failing_cell_are_its_failure_from_three_cells_on():
    # Issue 43, facts.py against its rule tests: the failing cell may be the one after the name; a row of two cells
    # is already its name and one cell.
    header = "NAME   STATUS   RESTARTS\n"
    assert error_lines(header + "refund-api-7d9f   OOMKilled   3\nweb-1   Running   0", 1) == \
        ["refund-api-7d9f OOMKilled"]
    assert error_lines(header + "refund-api-7d9f   OOMKilled\nweb-1   Running", 1) == ["refund-api-7d9f   OOMKilled"]


def test_a_rows_failure_that_spans_its_cells_keeps_the_row_whole():
    # No one cell reads as a failure ("expected 5", "got 7"), the row does: it is kept as it is, not cut to its name.
    assert error_lines("NAME   EXPECTED   ACTUAL\ncheck-3   expected 5   got 7\nweb-1   ok   fine", 1) == \
        ["check-3   expected 5   got 7"]


@pytest.mark.parametrize(("stored", "question"), [
    ({"kind": "error", "text": "make: *** [deploy] Error 2", "question": "Which errors were seen?"},
     "Which errors were seen?"),
    ({"kind": "error", "text": "make: *** [deploy] Error 2"}, ""),
])
def test_a_fact_stored_before_anchors_existed_keeps_its_question_or_none(stored, question):
    assert ProbeFact.from_dict(stored).question == question


def test_a_commands_exit_status_survives_storage():
    # A carried command fact is judged on its status again (`match.states`): stored and read back, it still has it.
    command = ProbeFact.of(FactKind.COMMAND, "exit 2 of make deploy", "q", about="make deploy", status=2,
                           subject="make deploy")
    assert ProbeFact.from_dict(command.to_dict()).status == 2


@pytest.mark.parametrize(("command", "line", "anchors"), [
    # a server's failed request: its target and status, not the client's address or request id
    ("tail -n 1 logs/access.log", '10.0.0.1 - req_7731 "POST /v1/refunds HTTP/1.1" 502 173', ("v1/refunds", "502")),
    # a line that names its place: the place and the line's own code, not the place's column
    ("npx tsc", "src/a.ts(12,5): error TS2345: Argument of type x", ("src/a.ts:12", "ts2345")),
    # a line with one identifier, an error code: the code
    ("cargo build", "error[E0382]: borrow of moved value", ("e0382",)),
    # a resource by its name without its kind, beside where it failed; not the failure's word (OOMKilled)
    ("kubectl get events", "pod/worker-3 OOMKilled on node-7", ("worker-3", "node-7")),
    # a name with an underscore is a value; the exception's class is not
    ("python run.py", "KeyError: customer_id missing in batch-7", ("customer_id", "batch-7")),
    # a name that extends another one is that thing qualified: the thing
    ("supervisorctl status", "worker-3_refunds stalled behind worker-3 on node-7", ("worker-3", "node-7")),
    # a path is a value by its form
    ("python etl.py", "FileNotFoundError: data/raw/x.parquet does not exist", ("data/raw/x.parquet",)),
])
def test_a_failure_line_is_proved_by_the_identifiers_that_say_what_failed(command, line, anchors):
    # Issue 43, facts.py against its rule tests: each reader of `_error_about`. A line so proved needs no words.
    history = [fcall("a", "exec_command", cmd=command), fout("a", exec_out(1, line))]
    assert [(f.anchors, f.words) for f in extract_facts(history) if f.kind is FactKind.ERROR and f.text == line] == \
        [(anchors, ())]


# Issue 43, facts.py against its rule tests alone: the short-output readers' boundaries.

@pytest.mark.parametrize(("output", "command", "values"), [
    ("42, 7.", "run", [("run output", "42 ; 7", "42, 7.")]),  # a value's trailing punctuation is not its own
    ("zoom 4X", "cam", [("zoom", "4X", "zoom 4X")]),  # but a capital X is
    ("saved to runs/7731/out", "save", [("to", "runs/7731/out", "saved to runs/7731/out")]),  # last part no digit
    ("retry 3 of 3 took 45", "retry", [("retry", "3 ; 45", "retry 3 of 3 took 45")]),  # once each, then on
    ("5 3 1 * * /opt/x.sh", "crontab -l", [("crontab output", "5 ; 3 ; 1", "5 3 1 * * /opt/x.sh")]),  # three: one
])
def test_a_short_output_lines_values_are_read_once_each_and_up_to_three_are_one_fact(output, command, values):
    assert short_output_values(output, command, set(), command) == values


@pytest.mark.parametrize(("output", "command"), [
    ("runs/7731 done", "tail 7731"),  # a path's numbered last part the call named
    ("7d9f ready", "kubectl logs pod/web-7d9f"),  # a token with letters the call named inside a longer argument
])
def test_a_short_outputs_value_its_call_named_is_left_out(output, command):
    assert short_output_values(output, command, set(), command) == []


def test_a_line_holding_a_value_part_of_a_known_value_is_no_catch_all():
    # `5` is part of the known 35: the line is left to the typed reader, which finds nothing of its own here.
    assert short_output_values("5 3 * * * /opt/x.sh", "crontab -l", {"35"}, "crontab -l") == []


def test_a_short_outputs_value_without_a_command_is_named_after_the_output():
    assert short_output_values("1.2G", "du", set()) == [("the output", "1.2G", "1.2G")]


@pytest.mark.parametrize(("output", "values"), [
    ("count\n4093", [("count", "4093", "4093")]),  # two lines: the first, without a digit, names the second
    ("count\n4093\n(1 row)\n7731 queued", [("count", "4093", "4093"), ("count", "7731", "7731 queued")]),
])
def test_a_short_outputs_first_line_without_a_digit_is_its_header_and_a_row_count_states_nothing(output, values):
    assert short_output_values(output, "q", set(), "q") == values


@pytest.mark.parametrize(("output", "name"), [
    ("Workers Idle 12", "Idle"),  # the capitalised word right before the value
    ("Latency (p99):    840ms", "Latency"),  # no word right before: the line's capitalised label
])
def test_a_short_outputs_value_is_named_by_the_word_before_it_else_its_lines_label(output, name):
    assert {found[0] for found in short_output_values(output, "bench", set(), "bench")} == {name}


def test_a_value_the_agent_used_is_read_once_on_any_line_and_not_when_its_call_held_it():
    output = "defaced ord_4801\nord_4801 ord_4802\nord_4803 ord_4804"
    uses = {"ord_4801": [5], "ord_4802": [5], "ord_4803": [0], "ord_4804": [5], "defaced": [5]}
    # a word of hex letters is no value, a repeat is one, a use before the output is none, each line is read
    assert used_values(output, 2, uses, "show") == ["ord_4801", "ord_4802", "ord_4804"]
    assert used_values(output, 2, uses, "show ord_4801") == ["ord_4802", "ord_4804"]  # the call held it


def test_a_table_header_is_found_in_an_outputs_first_three_lines_only():
    output = "building\nstep 1 done\nstep 2 done\nNAME   STATUS   RESTARTS\nweb-1   CrashLoopBackOff   3"
    assert error_lines(output, 1) == ["web-1   CrashLoopBackOff   3"]  # no header: the row as it is


def test_a_coded_failure_line_just_before_the_last_is_kept():
    output = "Error: a\njava.sql.SQLException: ORA-00942: table missing\nError: c"
    assert error_lines(output, 1) == ["Error: a", "Error: c", "java.sql.SQLException: ORA-00942: table missing"]


def test_a_place_followed_by_a_spaced_double_colon_is_still_a_place():
    assert place_in("src/a.py:12 :: boom") == "src/a.py:12"


def test_an_output_of_one_id_keeps_its_capital_letters_at_either_end():
    assert sole_value("X9F2A31X") == "X9F2A31X"


def test_a_setting_and_a_failures_place_are_stored_with_their_own_questions():
    # Issue 43, retention seed 5301: the question each is probed with (`extract_facts`' value and place facts).
    history = [fcall("c", "exec_command", cmd="cat conf/app.toml"), fout("c", exec_out(0, "listen_port = 19000")),
               fcall("t", "exec_command", cmd="pytest -q"), fout("t", exec_out(1, "src/pay/refund.py:42: Boom"))]
    questions = {f.question for f in extract_facts(history)}
    assert {"Which settings and values did you see, with their latest values?",
            "Where did the failure happen?"} <= questions
