"""Test counts: "3 failed, 12 passed" said in any order or as "3 of 15 fail".

A test run's summary line (pytest's `3 failed, 12 passed in 4.51s`, jest's `Tests: 3 failed, 12 passed, 15 total`,
cargo's `test result: FAILED. 12 passed; 3 failed`) is a fact made of counts, not of words or identifiers: a
summary keeps it when it gives the same number of failures and either the same number of passes or the same total
("3 of the 15 tests fail", "12/15 passing"), whatever the order, the wording and the duration it leaves out. A count that differs
is a different run.

Plain Python; the same texts always give the same verdict.
"""

from __future__ import annotations

import re

FAILED, PASSED, TOTAL = "failed", "passed", "total"

_WORD = {"fail": FAILED, "pass": PASSED, "succe": PASSED, "ok": PASSED, "total": TOTAL, "test": TOTAL}
# "3 failed", "12 passing", "15 total", "2 tests failed", "3 failures".
_COUNT = re.compile(r"(?<![\w.])(\d+)\s+(?:tests?\s+|specs?\s+|cases?\s+)?"
                    r"(fail(?:ed|ing|ures?|s)?|pass(?:ed|ing|es)?|succeeded|total)\b")
# "3 of 15 fail", "3 of the 15 tests in tests/api fail", "3 out of 15 failing".
_OF = re.compile(r"(?<![\w.])(\d+)\s+(?:out\s+)?of\s+(?:the\s+)?(\d+)\b((?:\s+[^\s.;,]+){0,4}?)\s+"
                 r"(fail(?:ed|ing|s)?|pass(?:ed|ing|es)?)\b")


def _kind(word: str) -> str:
    return next(kind for prefix, kind in _WORD.items() if word.startswith(prefix))


# "40/42 passing", "2/42 tests failed".
_SLASH = re.compile(r"(?<![\w./])(\d+)/(\d+)\s+(?:tests?\s+)?(fail(?:ed|ing|s)?|pass(?:ed|ing|es)?)\b")


def counts_of(text: str) -> dict[str, int]:
    """The failed, passed and total counts a text states (the first of each)."""
    found: dict[str, int] = {}
    lowered = text.lower()
    for match in _SLASH.finditer(lowered):
        found.setdefault(_kind(match.group(3)), int(match.group(1)))
        found.setdefault(TOTAL, int(match.group(2)))
    for match in _OF.finditer(lowered):
        part, whole, kind = int(match.group(1)), int(match.group(2)), _kind(match.group(4))
        found.setdefault(kind, part)
        found.setdefault(TOTAL, whole)
    for match in _COUNT.finditer(lowered):
        found.setdefault(_kind(match.group(2)), int(match.group(1)))
    return found


def run_counts(text: str) -> dict[str, int] | None:
    """The counts of a test run's summary line when it has failures and passes, else None."""
    found = counts_of(text)
    if FAILED in found and PASSED in found:
        return {FAILED: found[FAILED], PASSED: found[PASSED], TOTAL: found[FAILED] + found[PASSED]}
    return None


def states_counts(text: str, wanted: dict[str, int]) -> bool:
    """Whether a text gives a run's counts: its failures, and its passes or its total (either derives the other)."""
    said = counts_of(text)
    failed = said.get(FAILED)
    if failed is None and PASSED in said and TOTAL in said:
        failed = said[TOTAL] - said[PASSED]
    if failed != wanted[FAILED]:
        return False
    return said.get(PASSED) == wanted[PASSED] or said.get(TOTAL) == wanted[TOTAL]
