"""contradictions.py: what a claim says of a pending step. Written from the survivors of the retention room's
mutation samples (issue 43); each test fails with its mutant planted."""

from __future__ import annotations

from compaction_app.engine.retention.contradictions import claims_done


def test_a_step_whose_verb_ends_in_consonant_y_is_claimed_done_by_its_ied_past():
    assert claims_done("retry the failed upload", "retried the failed upload")
    assert not claims_done("retry the failed upload", "the failed upload")
