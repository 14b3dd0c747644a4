"""claims.py: a summary's structured lines read as "subject: value" claims. Written from the survivors of the
retention room's mutation samples (issue 43); each test fails with its mutant planted."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.claims import flat_claims


@pytest.mark.parametrize("row", ["| 3 | checkout 50 load | >= 370 req/s |", "| checkout 50 load | >= 370 req/s |"])
def test_a_table_row_of_two_cells_after_its_number_is_one_claim(row):
    assert flat_claims([row]) == ["checkout 50 load: >= 370 req/s"]
