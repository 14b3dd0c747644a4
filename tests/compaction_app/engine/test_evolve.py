"""`evolve` makes the same record `dataclasses.replace` makes, for the fold's frozen records."""

from dataclasses import replace

import pytest

from compaction_app.engine.evolve import evolve
from compaction_app.engine.meter import MeterState
from sessions_app.rollout.projection import Header


def test_evolve_gives_what_replace_gives_and_leaves_the_original():
    header = Header(meter=MeterState(usage_total=5), window_id="w0", last_seq=3)
    changed = evolve(header, last_seq=4, item_count=2)
    assert changed == replace(header, last_seq=4, item_count=2)
    assert hash(changed) == hash(replace(header, last_seq=4, item_count=2))
    assert (header.last_seq, header.item_count) == (3, 0)
    with pytest.raises(AttributeError):
        changed.last_seq = 9  # still frozen


def test_evolve_refuses_an_unknown_field_as_replace_does():
    with pytest.raises(TypeError, match="no field bogus"):
        evolve(MeterState(), bogus=1)
