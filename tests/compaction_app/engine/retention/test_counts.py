"""counts.py: a test run's counts, said in any order or as "3 of 15 fail" (issue 43: each rule with its
boundaries, so that a planted bug in the reader dies here, fast)."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.counts import counts_of, run_counts, states_counts

RUN = {"failed": 3, "passed": 12, "total": 15}


@pytest.mark.parametrize(("text", "counts"), [
    ("3 failed, 12 passed in 4.51s", {"failed": 3, "passed": 12}),  # pytest
    ("Tests: 3 failed, 12 passed, 15 total", RUN),  # jest
    ("test result: FAILED. 12 passed; 3 failed", {"failed": 3, "passed": 12}),  # cargo
    ("3 of 15 fail", {"failed": 3, "total": 15}),
    ("3 of the 15 tests in tests/api fail", {"failed": 3, "total": 15}),
    ("3 out of 15 failing", {"failed": 3, "total": 15}),
    ("3 of 15 pass", {"passed": 3, "total": 15}),
    ("12/15 passing", {"passed": 12, "total": 15}),
    ("2/42 tests failed", {"failed": 2, "total": 42}),
    ("2 tests failed", {"failed": 2}),
    ("5 specs failed", {"failed": 5}),
    ("3 failures", {"failed": 3}),
    ("12 succeeded", {"passed": 12}),
    ("12 passes", {"passed": 12}),
    ("v1.2 failed", {}),  # a version is no count
])
def test_the_counts_of_a_text_are_read_in_any_wording(text, counts):
    assert counts_of(text) == counts


def test_the_first_count_of_each_kind_is_the_one_read():
    assert counts_of("3 failed, 12 passed; rerun: 1 failed, 14 passed") == {"failed": 3, "passed": 12}


@pytest.mark.parametrize(("text", "counts"), [
    ("3 failed, 12 passed in 4.51s", RUN),
    ("test result: FAILED. 12 passed; 3 failed", RUN),
    ("3 of 15 fail", None),  # a run's line gives both its failures and its passes
    ("12 passed", None),
    ("3 failed", None),
])
def test_a_run_line_has_failures_and_passes_and_its_total_is_their_sum(text, counts):
    assert run_counts(text) == counts


@pytest.mark.parametrize(("text", "held"), [
    ("3 failed, 12 passed", True),
    ("12 passed, 3 failed", True),  # in any order
    ("3 of 15 fail", True),  # the total derives the passes
    ("3 failed, 15 total", True),
    ("12/15 passing", True),  # the passes and the total derive the failures
    ("12 passed, 15 total", True),
    ("11 passed, 15 total", False),
    ("3 failed, 11 passed", False),
    ("2 failed, 12 passed", False),
    ("3 failed", False),  # the failures alone are not the run
])
def test_a_run_is_stated_by_its_failures_and_its_passes_or_total(text, held):
    assert states_counts(text, RUN) is held
