"""quantities.py: numbers with units. Written from the survivors of the retention room's mutation samples
(issue 43); each test fails with its mutant planted."""

from __future__ import annotations

from compaction_app.engine.retention.quantities import SECONDS, quantities, quantity_of, states_quantity


def test_a_unit_glued_to_and_is_no_part_of_a_duration_and_the_rest_is_still_read():
    # "1hand 30s" (a space missed): "hand" is no unit, so there is no 1 h 30 s duration, only the 30 s after it.
    assert [(q.dimension, q.base) for q in quantities("done in 1hand 30s")] == [(SECONDS, 30.0)]
    assert [(q.dimension, q.base) for q in quantities("done in 1h and 30s")] == [(SECONDS, 3630.0)]


def test_a_duration_in_several_units_is_stated_by_its_bare_number_in_its_last_unit():
    # `1h30m` is 90 minutes: "took 90" leaves the unit implicit, as a one-unit quantity's bare number does.
    wanted = quantity_of("1h30m")
    assert states_quantity("the backfill took 90", wanted)
    assert not states_quantity("the backfill took 80", wanted)
