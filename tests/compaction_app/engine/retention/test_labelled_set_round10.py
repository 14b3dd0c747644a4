"""Round ten's held-out part (labelled_set_round10.py, blind_17): every family is planted held and lost at every
compaction ordinal, and each fact's tag names it alone, so its one run (docs/benchmarks.md, "round ten's held-out
part") counts each fact once. Its figure is not asserted here: the part is scored once, at the end of round ten.
blind_16, read for round ten, keeps its tuned figure."""

from __future__ import annotations

from compaction_app.engine.retention.score import carried_facts, score_compaction
from tests.compaction_app.engine.retention import labelled_set_round3 as r3
from tests.compaction_app.engine.retention import labelled_set_round9 as r9
from tests.compaction_app.engine.retention import labelled_set_round10 as r10


def test_every_family_of_blind_17_is_planted_held_and_lost_over_three_compactions():
    def sees_nothing(before, after, carried):
        return score_compaction([], [])  # no fact: the truth alone is counted

    tallies = r3.evaluate(r10.sessions(r10.BLIND_17), sees_nothing, lambda data: [])
    for name in (*r10.GROUPS[r10.BLIND_17], *r3.ORDINALS.values()):
        assert tallies[name].lost >= 30 and tallies[name].held >= 30, name


def test_no_tag_of_blind_17_is_found_in_another_facts_output_or_twice_in_its_own():
    # A tag held by another planted fact's output, or by a second line of its own, would pool two facts' verdicts.
    for session in r10.sessions(r10.BLIND_17):
        for n, phase in {(int(session.name.split("-")[1]), p) for p in range(3)}:
            planted = r10._blind_17(n, phase)
            for fact in planted:
                others = [o for o in planted if o is not fact]
                assert not any(fact.tag in str(item.get("output", "")) for o in others for item in o.items), fact.tag
                own = "".join(str(item.get("output", "")) for item in fact.items)
                assert own.count(fact.tag) <= 1, fact.tag


def test_blind_16_read_for_round_ten_keeps_its_tuned_figure():
    # blind_16 was read by cause for round ten (docs/retention.md, "round ten"): its figure is a tuned one.
    tally = r3.evaluate(r9.sessions(r9.BLIND_16), score_compaction, carried_facts)["all"]
    assert tally.found >= 498 and tally.false_lost == 0, (tally.found, tally.false_lost, tally.misses[:10])
