"""quantities.py: numbers with units. Written from the survivors of the retention room's mutation samples
(issue 43); each test fails with its mutant planted."""

from __future__ import annotations

from compaction_app.engine.retention.quantities import SECONDS, quantities


def test_a_unit_glued_to_and_is_no_part_of_a_duration_and_the_rest_is_still_read():
    # "1hand 30s" (a space missed): "hand" is no unit, so there is no 1 h 30 s duration, only the 30 s after it.
    assert [(q.dimension, q.base) for q in quantities("done in 1hand 30s")] == [(SECONDS, 30.0)]
    assert [(q.dimension, q.base) for q in quantities("done in 1h and 30s")] == [(SECONDS, 3630.0)]
