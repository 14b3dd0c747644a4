"""Round eight's held-out part (labelled_set_round8.py, blind_15): every family is planted held and lost at every
compaction ordinal, so its figure (docs/benchmarks.md, "round eight's held-out part") counts each of them. The part
is kept unread: its misses are not printed here, and its figure is not asserted (it is far below the goals). The
spent parts read for round eight keep its figures."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.score import carried_facts, score_compaction
from tests.compaction_app.engine.retention import labelled_set_round3 as r3
from tests.compaction_app.engine.retention import labelled_set_round5 as r5
from tests.compaction_app.engine.retention import labelled_set_round7 as r7
from tests.compaction_app.engine.retention import labelled_set_round8 as r8


def test_every_family_of_blind_15_is_planted_held_and_lost_over_three_compactions():
    def sees_nothing(before, after, carried):
        return score_compaction([], [])  # no fact: the truth alone is counted

    tallies = r3.evaluate(r8.sessions(r8.BLIND_15), sees_nothing, lambda data: [])
    for name in (*r8.GROUPS[r8.BLIND_15], *r3.ORDINALS.values()):
        assert tallies[name].lost >= 30 and tallies[name].held >= 30, name


# Round eight's figures on the parts whose misses were read for it (docs/retention.md, "round eight"), raised to
# round nine's where round nine's general rules moved them (blind_9, blind_10, blind_14): part ->
# (lost facts found at least, held facts called lost at most). A change that finds fewer lost facts or calls more
# held facts lost on any of them fails here; the goals (90%, 2%) are not met on all of them, so these are floors.
ROUND_EIGHT_FIGURES = {
    "blind_9": (391, 31), "blind_10": (363, 0), "blind_11": (353, 6), "blind_12": (326, 17), "blind_13": (452, 11),
    "blind_14": (375, 35),
}


@pytest.mark.parametrize("part", sorted(ROUND_EIGHT_FIGURES))
def test_the_spent_parts_keep_round_eights_figures(part):
    module = r7 if part in r7.PARTS else r5
    tally = r3.evaluate(module.sessions(part), score_compaction, carried_facts)["all"]
    found, false_lost = ROUND_EIGHT_FIGURES[part]
    assert tally.found >= found, (part, tally.found, tally.lost, tally.misses[:10])
    assert tally.false_lost <= false_lost, (part, tally.false_lost, tally.held, tally.misses[:10])
