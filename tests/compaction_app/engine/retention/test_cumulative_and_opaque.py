"""The score across a session's compactions (a fact held once is judged again; one lost stays lost) and on windows
whose compaction item is opaque (remote compaction: not scored, never 0%)."""

from __future__ import annotations

import json

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind, extract_facts
from compaction_app.engine.retention.score import carried_facts, score_compaction


def summary(*lines: str) -> dict:
    return user_message(SUMMARY_PREFIX + "\n" + "\n".join(lines))


GOAL = user_message("Move the invoices job to queue billing-7 and keep retries at 5.")
RUN = [{"type": "function_call", "call_id": "x1", "name": "exec_command", "arguments": json.dumps({"cmd": "make deploy"})},
       {"type": "function_call_output", "call_id": "x1",
        "output": "Chunk ID: 1\nWall time: 1.0 seconds\nProcess exited with code 2\nOutput:\nmake: *** [deploy] missing "
                  "target region eu-west-9"}]


def test_codex_0169_exec_command_outputs_give_the_command_and_its_exit_status():
    facts = {f.kind: f for f in extract_facts(RUN)}
    assert facts[FactKind.COMMAND].text == "exit 2 of make deploy" and facts[FactKind.COMMAND].status == 2
    assert "eu-west-9" in facts[FactKind.ERROR].text  # no word "Error" in it, and still an error


def test_a_second_compaction_judges_what_the_first_window_held():
    before1 = [GOAL, *RUN]
    after1 = [summary("- Goal: move the invoices job to queue billing-7, retries at 5.",
                      "- `make deploy` exited 2: missing target region eu-west-9")]
    first = score_compaction(before1, after1)
    assert first.score == 1.0
    carried = carried_facts(first.to_dict())
    assert {f.kind for f in carried} >= {FactKind.GOAL, FactKind.COMMAND}
    # The second window keeps the goal and drops the deploy failure: 0% would be wrong, 100% too.
    after2 = [summary("- Goal: move the invoices job to queue billing-7, retries at 5.")]
    second = score_compaction(after1, after2, carried=carried)
    verdicts = {v.fact.kind: v.kept for v in second.verdicts}
    assert verdicts[FactKind.GOAL] is True and verdicts[FactKind.COMMAND] is False
    assert 0 < second.score < 1
    # What the second compaction lost is carried to a third and stays lost there, though nothing left the window,
    # until a window states it again.
    carried2 = carried_facts(second.to_dict())
    third = score_compaction(after2, after2, carried=carried2)
    assert {v.fact.kind: v.kept for v in third.verdicts}[FactKind.COMMAND] is False and third.score < 1
    after4 = [summary("- Goal: move the invoices job to queue billing-7, retries at 5.",
                      "- `make deploy` exited 2 again: missing target region eu-west-9")]
    fourth = score_compaction(after2, after4, carried=carried_facts(third.to_dict()))
    assert {v.fact.kind: v.kept for v in fourth.verdicts}[FactKind.COMMAND] is True


def test_a_setting_lost_at_the_first_compaction_is_lost_at_the_third_through_the_cumulative_path():
    read = [{"type": "function_call", "call_id": "r1", "name": "exec_command",
             "arguments": json.dumps({"cmd": "cat deploy/api.toml"})},
            {"type": "function_call_output", "call_id": "r1",
             "output": "Process exited with code 0\nOutput:\n[server]\nlisten_port = 18443\n"}]
    carried: list = []
    window = [GOAL, *read]
    verdicts = []
    for text in ("- Goal: invoices job to billing-7.", "- Goal: invoices job to billing-7, retries at 5.",
                 "- Goal: invoices job to billing-7; retries 5."):
        after = [summary(text)]
        score = score_compaction(window, after, carried=carried)
        verdicts.append({v.fact.text: v.kept for v in score.verdicts if v.fact.setting == "listen_port"})
        carried, window = carried_facts(score.to_dict()), after
    assert all(v == {"listen_port = 18443 (in deploy/api.toml)": False} for v in verdicts), verdicts


def test_an_opaque_remote_window_is_not_scored_and_its_visible_part_is():
    after = [GOAL, {"type": "compaction", "encrypted_content": "gAAAA-opaque"}]
    score = score_compaction([GOAL, *RUN], after)
    assert score.opaque and score.score is None
    assert score.visible_score == 0.0 and score.total > 0
    data = score.to_dict()
    assert data["opaque"] is True and data["score"] is None and data["visible_score"] == 0.0
    assert carried_facts(data) == []
