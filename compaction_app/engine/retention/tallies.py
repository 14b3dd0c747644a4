"""A tally: one line of counts, each a number and what it counts (`Plan: 4 to add, 1 to change, 2 to destroy.`,
`1 failed, 14 passed in 0.31s`, `3 files changed, 10 insertions(+), 2 deletions(-)`).

Tools close a run with such a line, and it is what a summary keeps of the run ("the plan adds 4, changes 1 and
destroys 2"). Its counts are one fact: a summary states it when it states every count, in the tally's order (a
writer translating the labels keeps their order: "ajoute 4, en modifie 1 et en détruit 2") or each next to its own
label in any order ("2 to destroy, 4 to add"). The same counts in another order with other labels ("+2 ~1 -4" for
4 to add and 2 to destroy) say something else.

Plain Python; the same texts always give the same verdict.
"""

from __future__ import annotations

import re
from functools import lru_cache

from compaction_app.engine.retention.quantities import quantity_of

# One count: a whole number, a space and what it counts (a word, maybe after "to", maybe with a sign after it:
# `insertions(+)`). A number glued to its unit (`0.31s`) is a measure, not a count.
_COUNT = re.compile(r"(?<![\w.,])(?P<n>\d{1,3}(?:,\d{3})*|\d+)\s+(?P<label>(?:to\s+)?[A-Za-z][A-Za-z-]*(?:\([+-]\))?)")
# What may sit between two counts of a tally: a comma, a semicolon, "and" or an opening parenthesis, maybe after a
# second word of the label before it (`3 files changed, 10 insertions(+)`).
_BETWEEN = re.compile(r"(?:\s+[a-z]+)?\s*(?:,|;|\band\b|\()\s*|\s+")
# A tally has at least this many counts: one number and a word is prose ("4 ressources").
MIN_COUNTS = 2
# The name a tally's setting ends with: its counts are compared as a tally, not as a value.
TALLY_SUFFIX = "counts"


@lru_cache(maxsize=16384)
def _tally(line: str) -> tuple[tuple[tuple[int, str], ...], int, int]:
    """The first run of MIN_COUNTS counts or more with nothing but separators between them, and where it is."""
    found: list[tuple[int, str]] = []
    start = end = 0
    for match in _COUNT.finditer(line):
        if found and not _BETWEEN.fullmatch(line[end:match.start()]):
            if len(found) >= MIN_COUNTS:
                break
            found = []
        if quantity_of(f"{match.group('n')} {match.group('label')}") is not None:
            continue  # "5 seconds and 3 minutes" is a duration, not counts
        if not found:
            start = match.start()
        label = re.sub(r"\([+-]\)$", "", match.group("label")).split()[-1].lower()
        found.append((int(match.group("n").replace(",", "")), label))
        end = match.end()
    return (tuple(found), start, end) if len(found) >= MIN_COUNTS else ((), 0, 0)


def tally_of(line: str) -> tuple[tuple[int, str], ...]:
    """The counts of a line that holds a tally, in order, as (number, its label's last word in lower case); ()
    when it holds none (fewer than MIN_COUNTS counts with nothing but separators between them)."""
    return _tally(line)[0]


def tally_text(line: str) -> str | None:
    """The part of a line its tally is written in ("4 to add, 1 to change, 2 to destroy"), else None."""
    counts, start, end = _tally(line)
    return line[start:end] if counts else None


def is_tally_setting(setting: str) -> bool:
    return setting == TALLY_SUFFIX or setting.endswith(f"_{TALLY_SUFFIX}")


_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d,])|(?<![\w.,])\d+(?![\w,]|\.\d)")
_LABELLED = re.compile(r"(?<![\w.,])(\d+)\s+(?:to\s+)?([a-z][a-z-]*)|([a-z][a-z-]*):?\s+(\d+)(?![\w.,])")


@lru_cache(maxsize=16384)
def _numbers_in_order(text: str) -> tuple[int, ...]:
    return tuple(int(m.group().replace(",", "")) for m in _NUMBER.finditer(text))


def _in_order(wanted: list[int], said: tuple[int, ...]) -> bool:
    position = 0
    for number in said:
        if position < len(wanted) and number == wanted[position]:
            position += 1
    return position == len(wanted)


def states_tally(text: str, value: str) -> bool:
    """Whether a text states a tally's every count, in its order or each beside its own label."""
    counts = tally_of(value)
    if not counts:
        return False
    if _in_order([n for n, _ in counts], _numbers_in_order(text)):
        return True
    said = {(int(m.group(1)), m.group(2)) if m.group(1) else (int(m.group(4)), m.group(3))
            for m in _LABELLED.finditer(text.lower())}
    return all((number, label) in said for number, label in counts)
