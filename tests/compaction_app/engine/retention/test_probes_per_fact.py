"""Probes judged per fact (issue 46): a command's exit status and a setting's value get a numbered question of their
own, judged on its answer line alone; "I do not know" and "looked ok" keep nothing; the simulated model answers a
dropped fact with "I do not know"; on the labelled set the probes call at most 2% of lost facts kept."""

from __future__ import annotations

import asyncio

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind, ProbeFact
from compaction_app.engine.retention.probes import model_judged_check, pointed
from compaction_app.engine.retention.score import carried_facts, judge_answers, score_compaction
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.factory import build_client
from tests.compaction_app.engine.retention import labelled_set_round3 as r3
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout, lost_called_kept
from tests.compaction_app.engine.retention.labelled_set import sessions as round_two_sessions

CLIENT = build_client(ProviderConfig(name="sim", model="sim"))
RUN = [fcall("p1", "exec_command", cmd="pytest -q tests/test_refund.py"),
       fout("p1", exec_out(1, "F.\n1 failed, 1 passed in 0.3s"))]
EXIT = ProbeFact.of(FactKind.COMMAND, "exit 1 of pytest -q tests/test_refund.py", "", about="pytest -q tests/test_refund.py",
                    status=1, subject="pytest -q tests/test_refund.py")


def probe(before, after, carried):
    facts = [v.fact for v in score_compaction(before, after, carried=carried).verdicts]
    return asyncio.run(model_judged_check(facts=facts, after=after, client=CLIENT, model="sim"))


CLEAN = ProbeFact.of(FactKind.COMMAND, "exit 0 of ruff check .", "", about="ruff check .", status=0,
                     subject="ruff check .")


def judged(answer: str, fact: ProbeFact = EXIT) -> bool:
    (number, fact, _), = pointed([fact], fact.category)
    score = judge_answers([fact], {fact.category.value: answer}, tokens_spent=0, numbered={fact.key: number})
    return score.verdicts[0].kept


def test_an_exit_status_is_kept_only_by_an_answer_that_states_it():
    assert judged("- pytest -q tests/test_refund.py\nA1. It exited with code 1.") is True
    assert judged("A1. I do not know how either command exited; it looked ok.", CLEAN) is False
    assert judged("A1. looked ok, all green and clean", CLEAN) is False
    assert judged("A1. I do not know, probably passed", CLEAN) is False
    assert judged("A1. it passed (exit code 0)", CLEAN) is True
    assert judged("A1. I do not know how either command exited; the tests looked ok.") is False
    assert judged("A1. looked ok, green") is False
    assert judged("A1. exit code 0") is False
    # The list part naming the command does not answer the question about its status.
    assert judged("`pytest -q tests/test_refund.py` exit code: 1\nA1. I do not know.") is False


def test_the_simulated_model_answers_a_dropped_exit_status_with_i_do_not_know():
    dropped = asyncio.run(model_judged_check(facts=[EXIT], after=[user_message(f"{SUMMARY_PREFIX}\n- Ran pytest.")],
                                             client=CLIENT, model="sim"))
    assert dropped.verdicts[0].kept is False and dropped.verdicts[0].answer == "I do not know."
    held = asyncio.run(model_judged_check(facts=[EXIT], after=RUN, client=CLIENT, model="sim"))
    assert held.verdicts[0].kept is True and "1" in held.verdicts[0].answer


def test_a_probe_verdict_is_shown_beside_the_structural_one_when_they_disagree():
    structural = score_compaction([user_message("go"), *RUN], [user_message("go")])
    probed = judge_answers([v.fact for v in structural.verdicts], {"artifact_trail": "A1. exited with code 1"},
                           tokens_spent=0, numbered={EXIT.key: 1}).compared_with(structural)
    (verdict,) = [v for v in probed.verdicts if v.fact.key == EXIT.key]
    assert verdict.structural_kept is False and verdict.kept is True and verdict.disagrees
    assert probed.to_dict()["disagreements"] >= 1


def test_probes_call_at_most_two_percent_of_lost_facts_kept_on_the_labelled_set():
    lost = called_kept = 0
    for part in r3.PARTS:
        tally = r3.evaluate(r3.sessions(part), probe, carried_facts)["all"]
        lost += tally.lost
        called_kept += tally.lost - tally.found
    more_kept, more_lost = lost_called_kept(round_two_sessions(), lambda before, after: probe(before, after, []))
    called_kept, lost = called_kept + more_kept, lost + more_lost
    assert lost > 1000
    assert called_kept / lost <= 0.02, (called_kept, lost)


LATENCY = [fcall("l1", "exec_command", cmd="./scripts/latency --route /export/21"),
           fout("l1", exec_out(0, "samples: 5000\np95_latency: 421 ms")),
           fcall("l2", "exec_command", cmd="./scripts/latency --route /export/22"),
           fout("l2", exec_out(0, "samples: 5000\np95_latency: 422 ms"))]


def _setting_probe(summary: str, tag: str):
    facts = [v.fact for v in score_compaction([user_message("go"), *LATENCY], [user_message("go")]).verdicts
             if v.fact.setting == "p95_latency" and tag in v.fact.text]
    after = [user_message("go"), user_message(f"{SUMMARY_PREFIX}\n{summary}")]
    (verdict,) = asyncio.run(model_judged_check(facts=facts, after=after, client=CLIENT, model="sim")).verdicts
    return verdict


def test_the_simulated_model_finds_a_setting_the_summary_renamed_by_what_it_was_read_from():
    verdict = _setting_probe("- /export/21 answers in 421 ms at the 95th percentile", "/export/21")
    assert verdict.kept is True and "421 ms" in verdict.answer


def test_the_simulated_model_answers_with_the_line_about_the_same_thing_not_a_siblings():
    summary = "- p95_latency of /export/21: 421 ms\n- p95_latency of /export/22: 422 ms"
    assert _setting_probe(summary, "/export/21").kept is True  # the last line naming p95_latency is /export/22's
    assert _setting_probe("- p95_latency of /export/22: 422 ms", "/export/21").kept is False
