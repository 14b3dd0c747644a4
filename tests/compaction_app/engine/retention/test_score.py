"""score.py: the structural and the model-judged verdicts, and the facts a stored score carries. The first tests
were written from the survivors of the retention room's mutation samples (issue 43); the rest state each rule
directly, with its boundaries."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind, ProbeFact
from compaction_app.engine.retention.score import (
    MAX_CARRIED,
    CheckMethod,
    RetentionScore,
    Verdict,
    carried_facts,
    contradicts,
    facts_that_left,
    hedged,
    is_opaque,
    judge_answers,
    numbered_answer,
    score_compaction,
    segments,
    strict_status,
    structural_check,
)
from tests.compaction_app.engine.retention.labelled_set import assistant, exec_out, fcall, fout

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


# The rules of score.py, each with its boundaries.

GOAL = ProbeFact.of(FactKind.GOAL, "fix the rounding in src/billing/split.py", "q")  # weight 3
READ = ProbeFact.of(FactKind.FILE_READ, "src/ledger.py", "q")  # weight 1
STEP = ProbeFact.of(FactKind.NEXT_STEP, "backfill invoice_lines for tenant t21", "q")  # weight 2


def scored(*kept: tuple[ProbeFact, bool], opaque: bool = False) -> RetentionScore:
    return RetentionScore(method=CheckMethod.STRUCTURAL, verdicts=tuple(Verdict(f, k) for f, k in kept),
                          opaque=opaque)


def test_a_score_is_the_weighted_share_kept_and_none_when_nothing_left_or_the_window_is_opaque():
    score = scored((GOAL, True), (READ, False), (STEP, False))
    assert (score.score, score.kept, score.total) == (0.5, 1, 3)  # 3 of 6
    assert scored((GOAL, False), (READ, True), (STEP, True)).score == 0.5
    assert scored((READ, True), (STEP, False)).score == 0.3333  # rounded to four places
    assert scored().score is None
    opaque = scored((GOAL, True), (READ, False), opaque=True)
    assert (opaque.score, opaque.visible_score) == (None, 0.75)
    assert [f.key for f in score.held] == [GOAL.key] and [f.key for f in score.forgotten] == [READ.key, STEP.key]


def test_a_scores_categories_each_have_their_kept_total_and_weighted_score():
    rows = scored((GOAL, True), (READ, False), (STEP, True)).by_category()
    assert rows == {"recall": {"kept": 1, "total": 1, "score": 1.0},
                    "artifact_trail": {"kept": 0, "total": 1, "score": 0.0},
                    "continuation": {"kept": 1, "total": 1, "score": 1.0},
                    "decision": {"kept": 0, "total": 0, "score": None}}
    assert scored((GOAL, True), opaque=True).by_category()["recall"]["score"] is None


def test_a_model_judged_score_beside_the_structural_one_shows_where_they_disagree():
    judged = scored((GOAL, True), (READ, True), (STEP, False))
    compared = judged.compared_with(scored((GOAL, True), (READ, False)))
    assert [(v.structural_kept, v.disagrees) for v in compared.verdicts] == [(True, False), (False, True),
                                                                            (None, False)]
    assert [v.fact for v in compared.disagreements] == [READ]
    assert judged.compared_with(None) is judged
    stored = compared.to_dict()
    assert (stored["disagreements"], stored["score"], stored["kept"], stored["total"]) == (1, 0.6667, 2, 3)
    assert stored["facts"][1] | {} == {**READ.to_dict(), "kept": True, "structural_kept": False, "disagrees": True}
    assert "structural_kept" not in stored["facts"][2]
    assert Verdict(GOAL, True, answer="A1. x").to_dict()["answer"] == "A1. x"
    assert "answer" not in Verdict(GOAL, True).to_dict()


def test_a_windows_segments_are_messages_their_lines_and_sentences_tool_calls_with_outputs_and_reasoning():
    items = [user_message("plain user text. Second one."), assistant("a1\na2"),
             fcall("c", "exec_command", cmd="ls"), fout("c", "out"), fout("z", "orphan"),
             {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thought"}, {"text": "more"}]},
             {"type": "reasoning", "summary": []}]
    found = [(s.text, s.tool, s.multi, s.joined) for s in segments(items)]
    assert found == [
        ("plain user text. second one.", False, True, False),  # a message whole, of several sentences
        ("plain user text. second one.", False, True, False),  # its one line, of several sentences
        ("plain user text.", False, False, False), ("second one.", False, False, False),
        ("a1 a2", False, True, False), ("a1", False, False, False), ("a2", False, False, False),
        ("a1 a2", False, False, True),  # two adjacent lines
        ('exec_command ls { cmd : ls } out', True, False, False),  # a call with its output
        ("orphan", False, False, False),  # an output whose call is gone
        ("thought more", False, False, False),
    ]


def test_a_summary_is_read_as_its_lines_and_claims_not_as_one_message():
    def whole(text: str) -> list[str]:  # segments of several sentences that hold the claim, not two joined lines
        return [s.text for s in segments([user_message(text)]) if s.multi and "a_1" in s.text]

    assert whole("Note this. And this\n- a_1 done") == ["note this. and this - a_1 done"]
    assert whole(f"{SUMMARY_PREFIX}\n- a_1 done") == []
    assert "k: v1" in [s.text for s in segments([user_message(f"{SUMMARY_PREFIX}\n| k | v1 |")])]


def test_a_window_is_opaque_when_it_holds_an_encrypted_compaction_item():
    assert is_opaque([user_message("x"), {"type": "compaction", "encrypted_content": "abc"}])
    assert not is_opaque([{"type": "compaction", "encrypted_content": ""}])
    assert not is_opaque([user_message("x")])


def test_the_structural_check_judges_each_fact_against_the_windows_segments():
    result = structural_check([GOAL, READ], [user_message("fix the rounding in src/billing/split.py")])
    assert result.method is CheckMethod.STRUCTURAL
    assert [v.kept for v in result.verdicts] == [True, False]
    assert structural_check([GOAL], [{"type": "compaction", "encrypted_content": "abc"}]).opaque


@pytest.mark.parametrize(("code", "text", "asserted"), [
    (0, "exit code: 0", True), (0, "passed", True), (1, "failed", True), (1, "exit 1", True),
    (1, "exit code 1", True), (1, "status: 1", True), (2, "crashed", True),
    (0, "ok", False), (0, "green", False), (1, "looked fine", False), (0, "failed", False), (1, "passed", False),
])
def test_an_answer_asserts_an_exit_status_by_its_number_or_pass_and_fail_words_not_by_ok(code, text, asserted):
    assert bool(strict_status(code).search(text)) is asserted


@pytest.mark.parametrize(("line", "hedges"), [
    ("I do not know", True), ("I don\u2019t know how", True), ("not sure", True), ("n/a", True),
    ("unknown", True), ("the tests passed", False), ("I know it", False),
])
def test_an_answer_line_that_says_it_does_not_know_is_no_evidence(line, hedges):
    assert hedged(line) is hedges


@pytest.mark.parametrize(("answer", "number", "line"), [
    ("A1. yes\nA2: no\na3) maybe", 2, "no"),
    ("A1. yes\nA2: no\na3) maybe", 3, "maybe"),
    ("A1. yes", 4, None),
    ("1. one\n2) two", 2, "two"),  # numbered without "A" when no line has it
    ("A1. x\n2. two", 2, None),  # not when some line has it
    ("", 1, None),
])
def test_the_answer_to_question_n_is_the_line_numbered_n(answer, number, line):
    assert numbered_answer(answer, number) == line


SETTING = ProbeFact.of(FactKind.VALUE, "port = 19000 (in curl checkout-11)", "q", subject="curl checkout-11",
                       setting="port", value="19000")
RUN_FAILED = ProbeFact.of(FactKind.COMMAND, "exit 1 of make deploy", "q", status=1, subject="make deploy")


@pytest.mark.parametrize(("answer", "kept"), [
    ("A1. 19000\nA2. it failed", [True, True]),
    ("A1. port 19000 on checkout-10\nA2. exit code 2", [False, False]),  # a sibling's value; another status
    ("A1. I do not know, maybe 19000\nA2. ok", [False, False]),  # hedged; "ok" asserts no status
    ("A2. failed", [False, True]),  # no answer to question 1
])
def test_a_pointed_fact_is_judged_on_its_numbered_answer_alone(answer, kept):
    score = judge_answers([SETTING, RUN_FAILED], {"artifact_trail": answer}, tokens_spent=7,
                          numbered={SETTING.key: 1, RUN_FAILED.key: 2})
    assert [v.kept for v in score.verdicts] == kept
    assert (score.method, score.tokens_spent, score.answers) == (CheckMethod.MODEL_JUDGED, 7,
                                                                 {"artifact_trail": answer})


def test_a_fact_without_its_own_question_is_judged_on_its_categorys_lines_that_do_not_hedge():
    facts = [GOAL, READ]
    assert [v.kept for v in judge_answers(facts, {"recall": "fix the rounding in src/billing/split.py",
                                                  "artifact_trail": "read src/ledger.py"},
                                          tokens_spent=0).verdicts] == [True, True]
    assert [v.kept for v in judge_answers(facts, {"recall": "not sure: fix the rounding in src/billing/split.py",
                                                  "artifact_trail": "A1. src/ledger.py"},
                                          tokens_spent=0).verdicts] == [False, False]  # hedged; a numbered line


@pytest.mark.parametrize(("fact", "claim", "opposite"), [
    (STEP, "backfilled invoice_lines for tenant t21", True),  # a pending step reported done
    (STEP, "still to backfill invoice_lines for tenant t21", False),
    (ProbeFact.of(FactKind.CONSTRAINT, "don't run migrations against prod-20", "q"), "migrations go to prod-20",
     True),  # a prohibition without its negative
    (ProbeFact.of(FactKind.CONSTRAINT, "don't run migrations against prod-20", "q"), "never migrate prod-20", False),
    (ProbeFact.of(FactKind.DECISION, "use Celery instead of Redis streams", "q"), "Redis streams, not Celery",
     True),  # a choice turned round
    (ProbeFact.of(FactKind.GOAL, "use Celery instead of Redis streams", "q"), "Redis streams, not Celery", True),
    (ProbeFact.of(FactKind.DECISION, "use Celery instead of Redis streams", "q"), "Celery, not Redis streams",
     False),
    (ProbeFact.of(FactKind.GOAL, "don't touch prod-20", "q"), "touch prod-20", False),  # only a constraint's
    (ProbeFact.of(FactKind.GOAL, "backfill t21", "q"), "backfilled t21", False),  # only a next step's
    (ProbeFact.of(FactKind.ERROR, "use Celery instead of Redis", "q"), "Redis, not Celery", False),
])
def test_a_claim_contradicts_a_fact_by_the_opposite_its_kind_can_say(fact, claim, opposite):
    assert contradicts(fact, claim) is opposite


def test_a_claim_is_read_in_the_sentence_that_names_the_facts_first_identifier():
    fact = ProbeFact.of(FactKind.CONSTRAINT, "don't run migrations against prod-20", "q")
    window = [user_message(f"{SUMMARY_PREFIX}\n- Never run migrations against prod-20. Staging-20 goes ahead.")]
    assert score_compaction([user_message(fact.text)], window).verdicts[1].kept
    window = [user_message(f"{SUMMARY_PREFIX}\n- Migrations go to prod-20 now. Staging-20 is never touched.")]
    assert not any(v.kept for v in score_compaction([user_message(fact.text)], window).verdicts
                   if v.fact.kind is FactKind.CONSTRAINT)
    # Two identifiers: the sentence naming the first says what is claimed, not one naming only the second.
    fact = ProbeFact.of(FactKind.CONSTRAINT, "don't run migrations against prod-20 from ci-7", "q")
    assert not contradicts(fact, "never run migrations against prod-20 from ci-7.")
    claim = "Migrations run against prod-20 from ci-7 now. ci-7 is never used for deploys."
    assert structural_check([fact], [user_message(claim)]).kept == 0


def test_a_commands_own_text_is_taken_out_before_its_status_is_read():
    # `grep failed` says "failed" in its command line: the status must be said apart from it.
    history = [fcall("g", "exec_command", cmd="grep -c failed logs/app.log"), fout("g", exec_out(1, "0"))]
    fact = next(v.fact for v in score_compaction(history, []).verdicts if v.fact.kind is FactKind.COMMAND)
    assert structural_check([fact], [user_message("ran grep -c failed logs/app.log, it exited with 1")]).kept == 1
    assert structural_check([fact], [user_message("ran grep -c failed logs/app.log")]).kept == 0


def test_carried_facts_are_none_for_an_opaque_or_missing_score_and_at_most_the_last_400():
    assert carried_facts(None) == [] and carried_facts({}) == []
    assert carried_facts({"opaque": True, "facts": [READ.to_dict()]}) == []
    many = [ProbeFact.of(FactKind.FILE_READ, f"src/f{i}.py", "q").to_dict() for i in range(MAX_CARRIED + 5)]
    carried = carried_facts({"facts": many})
    assert len(carried) == MAX_CARRIED and carried[0].text == "src/f5.py"


def test_the_facts_that_left_include_a_masked_outputs_call_and_each_pin_and_carried_fact_once():
    call, output = fcall("t", "exec_command", cmd="pytest -q"), fout("t", exec_out(1, "1 failed, 3 passed"))
    pin = ProbeFact.of(FactKind.PIN, "never deploy on Fridays", "q")
    facts = facts_that_left([call, output], [call], pins=[pin, pin], carried=[READ, READ])
    kinds = [f.kind for f in facts]
    assert FactKind.COMMAND in kinds  # the output left while its call stayed: the command is probed
    assert kinds.count(FactKind.PIN) == 1 and kinds.count(FactKind.FILE_READ) == 1


def test_a_test_runs_counts_are_stated_by_one_line_in_any_order():
    # Issue 43, retention seed 5103: one line states them; two joined lines are not read for counts.
    history = [fcall("t", "exec_command", cmd="pytest -q tests/pay"),
               fout("t", exec_out(1, "FAILED tests/pay/test_a.py::test_a - boom\n1 failed, 3 passed in 0.2s"))]
    fact = next(v.fact for v in score_compaction(history, []).verdicts if v.fact.text.startswith("1 failed"))
    assert structural_check([fact], [user_message("pytest: 3 passed, 1 failed")]).kept == 1
    assert structural_check([fact], [user_message("pytest: 2 passed, 1 failed")]).kept == 0
