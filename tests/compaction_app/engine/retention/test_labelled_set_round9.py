"""Round nine's held-out part (labelled_set_round9.py, blind_16): every family is planted held and lost at every
compaction ordinal, and each fact's tag names it alone, so its one run (docs/benchmarks.md, "round nine's held-out
part") counts each fact once. Its figure is not asserted here: the part is scored once, at the end of round nine."""

from __future__ import annotations

from compaction_app.engine.retention.score import score_compaction
from tests.compaction_app.engine.retention import labelled_set_round3 as r3
from tests.compaction_app.engine.retention import labelled_set_round9 as r9


def test_every_family_of_blind_16_is_planted_held_and_lost_over_three_compactions():
    def sees_nothing(before, after, carried):
        return score_compaction([], [])  # no fact: the truth alone is counted

    tallies = r3.evaluate(r9.sessions(r9.BLIND_16), sees_nothing, lambda data: [])
    for name in (*r9.GROUPS[r9.BLIND_16], *r3.ORDINALS.values()):
        assert tallies[name].lost >= 30 and tallies[name].held >= 30, name


def test_no_tag_of_blind_16_is_found_in_another_facts_output():
    # A tag held by another planted fact's output would pool two facts' verdicts into one.
    for session in r9.sessions(r9.BLIND_16):
        for n, phase in {(int(session.name.split("-")[1]), p) for p in range(3)}:
            planted = r9._blind_16(n, phase)
            for fact in planted:
                others = [o for o in planted if o is not fact]
                assert not any(fact.tag in str(item.get("output", "")) for o in others for item in o.items), fact.tag
