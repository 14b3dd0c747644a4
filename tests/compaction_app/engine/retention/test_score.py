"""score.py: the structural and the model-judged verdicts, and the facts a stored score carries. Written from the
survivors of the retention room's mutation samples (issue 43); each test fails with its mutant planted."""

from __future__ import annotations

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind, ProbeFact
from compaction_app.engine.retention.score import carried_facts, judge_answers, score_compaction
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout

RUN = [fcall("d", "exec_command", cmd="make deploy REGION=eu-west-9"),
       fout("d", exec_out(2, "make: *** [deploy] missing target region eu-west-9"))]
PIN = ProbeFact.of(FactKind.PIN, "never deploy on Fridays", "Which pinned facts hold?")


def test_a_stored_score_carries_the_facts_it_judged_but_not_its_pins():
    # The pins in force are added again at each compaction; a pin removed since must not come back as carried.
    window = [user_message(f"{SUMMARY_PREFIX}\n- make deploy failed: missing target region eu-west-9")]
    stored = score_compaction(RUN, window, pins=[PIN]).to_dict()
    assert FactKind.PIN.value in {f["kind"] for f in stored["facts"]}
    carried = carried_facts(stored)
    assert carried and FactKind.PIN not in {f.kind for f in carried}


def test_a_category_the_model_gave_no_answer_for_keeps_none_of_its_facts():
    facts = [v.fact for v in score_compaction(RUN, []).verdicts]
    assert facts
    score = judge_answers(facts, {}, tokens_spent=0)
    assert [v.kept for v in score.verdicts] == [False] * len(facts)
