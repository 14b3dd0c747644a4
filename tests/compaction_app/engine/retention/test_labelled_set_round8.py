"""Round eight's held-out part (labelled_set_round8.py, blind_15): every family is planted held and lost at every
compaction ordinal, so its figure (docs/benchmarks.md, "round eight's held-out part") counts each of them. The part
is kept unread: its misses are not printed here."""

from __future__ import annotations

from compaction_app.engine.retention.score import score_compaction
from tests.compaction_app.engine.retention import labelled_set_round3 as r3
from tests.compaction_app.engine.retention import labelled_set_round8 as r8


def test_every_family_of_blind_15_is_planted_held_and_lost_over_three_compactions():
    def sees_nothing(before, after, carried):
        return score_compaction([], [])  # no fact: the truth alone is counted

    tallies = r3.evaluate(r8.sessions(r8.BLIND_15), sees_nothing, lambda data: [])
    for name in (*r8.GROUPS[r8.BLIND_15], *r3.ORDINALS.values()):
        assert tallies[name].lost >= 30 and tallies[name].held >= 30, name
