"""The retention scorer: probe facts from what left the window, and the structural check of what survived."""

from __future__ import annotations

import json

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import Category, FactKind, extract_facts, left_items
from compaction_app.engine.retention.score import facts_that_left, score_compaction, structural_check


def call(call_id: str, name: str, **args) -> dict:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)}


def output(call_id: str, text: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


GOAL = user_message("Fix tests/billing/test_split.py. Money must always be Decimal, never float.")
HISTORY = [
    GOAL,
    call("c1", "read_file", path="src/billing/split.py"),
    output("c1", "def split_amount(total, parts): ..."),
    call("c2", "shell", command=["bash", "-lc", "pytest -q tests/billing/test_split.py"]),
    output("c2", "Exit code: 1\nWall time: 0.4 seconds\nOutput:\nFAILED tests/billing/test_split.py::test_split"),
    call("c3", "apply_patch", input="*** Begin Patch\n*** Update File: src/billing/split.py\n@@\n*** End Patch\n"),
    output("c3", "Success. Updated the following files:\nM src/billing/split.py"),
    assistant("The root cause is the lost remainder cent.\nNext: add a test for 100.00 split into 7 parts"),
]


def summary(text: str) -> dict:
    return user_message(f"{SUMMARY_PREFIX}\n{text}")


def kinds(facts) -> dict[FactKind, list[str]]:
    out: dict[FactKind, list[str]] = {}
    for f in facts:
        out.setdefault(f.kind, []).append(f.text)
    return out


def test_facts_cover_the_four_probe_categories_deterministically():
    facts = extract_facts(HISTORY)
    by_kind = kinds(facts)
    assert by_kind[FactKind.FILE_READ] == ["src/billing/split.py"]
    assert by_kind[FactKind.FILE_CHANGED] == ["src/billing/split.py"]
    assert by_kind[FactKind.COMMAND] == ["exit 1 of pytest -q tests/billing/test_split.py"]
    assert by_kind[FactKind.ERROR] == ["FAILED tests/billing/test_split.py::test_split"]
    assert "Money must always be Decimal, never float." in by_kind[FactKind.CONSTRAINT]
    assert by_kind[FactKind.DECISION] == ["The root cause is the lost remainder cent."]
    assert "add a test for 100.00 split into 7 parts" in by_kind[FactKind.NEXT_STEP]
    assert {f.category for f in facts} == set(Category)
    assert [f.to_dict() for f in extract_facts(HISTORY)] == [f.to_dict() for f in facts]


def test_every_fact_of_a_history_is_kept_by_that_history():
    score = structural_check(extract_facts(HISTORY), HISTORY)
    assert score.total > 0 and score.kept == score.total and score.forgotten == []


def test_an_empty_window_forgets_every_fact():
    score = score_compaction(HISTORY, [])
    assert score.total == len(extract_facts(HISTORY)) and score.kept == 0 and score.score == 0.0


def test_nothing_left_means_nothing_to_score():
    assert score_compaction(HISTORY, list(HISTORY)).score is None
    assert left_items(HISTORY, list(reversed(HISTORY))) == []


def test_a_summary_keeps_what_it_states_and_forgets_the_exit_status_it_omits():
    after = [GOAL, summary("Files mentioned:\n- `src/billing/split.py`\nCommands run:\n"
                           "- `pytest -q tests/billing/test_split.py`\nNext steps:\n"
                           "- add a test for 100.00 split into 7 parts")]
    score = score_compaction(HISTORY, after)
    forgotten = {f.text for f in score.forgotten}
    assert "exit 1 of pytest -q tests/billing/test_split.py" in forgotten
    assert "FAILED tests/billing/test_split.py::test_split" in forgotten
    kept = {v.fact.text for v in score.verdicts if v.kept}
    assert {"src/billing/split.py", "add a test for 100.00 split into 7 parts"} <= kept
    assert score.by_category()["continuation"]["kept"] >= 1


def test_exit_status_counts_only_next_to_its_command():
    # "exit code: 1" elsewhere in the summary does not prove that *pytest* exited 1.
    scattered = [summary("Commands run:\n- `pytest -q tests/billing/test_split.py`\nOther:\n- ruff exit code: 1")]
    together = [summary("- `pytest -q tests/billing/test_split.py` exit code: 1")]
    fact = "exit 1 of pytest -q tests/billing/test_split.py"
    assert fact in {f.text for f in score_compaction(HISTORY, scattered).forgotten}
    assert fact not in {f.text for f in score_compaction(HISTORY, together).forgotten}


def test_an_output_masked_while_its_call_stays_is_probed_with_its_call():
    masked = [i if i.get("call_id") != "c2" or i["type"] == "function_call"
              else output("c2", "[output masked by compactweb: 40 tokens]") for i in HISTORY]
    facts = {f.text for f in facts_that_left(HISTORY, masked)}
    assert facts == {"exit 1 of pytest -q tests/billing/test_split.py",
                     "FAILED tests/billing/test_split.py::test_split"}
    assert {f.text for f in score_compaction(HISTORY, masked).forgotten} == facts
