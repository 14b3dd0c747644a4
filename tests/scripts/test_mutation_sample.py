"""The nightly mutation command's sample mode (scripts/mutation_rooms.py): which mutants a seeded sample picks,
and the interval its score is printed with."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mutation_rooms", ROOT / "scripts" / "mutation_rooms.py")
mutation_rooms = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutation_rooms)

NAMES = [f"gateway_app.journal.x_note__mutmut_{i}" for i in range(1, 201)]


def test_a_sample_is_the_same_for_the_same_seed_whatever_order_the_names_were_found_in():
    first = mutation_rooms.sample_names(NAMES, 40, seed=7)
    again = mutation_rooms.sample_names(list(reversed(NAMES)), 40, seed=7)

    assert first == again
    assert len(first) == 40


def test_another_seed_draws_another_sample():
    assert mutation_rooms.sample_names(NAMES, 40, seed=1) != mutation_rooms.sample_names(NAMES, 40, seed=2)


def test_a_sample_holds_distinct_names_of_the_room_only():
    picked = mutation_rooms.sample_names(NAMES + NAMES[:10], 60, seed=3)

    assert len(set(picked)) == 60
    assert set(picked) <= set(NAMES)


def test_a_sample_larger_than_the_room_is_the_whole_room():
    assert mutation_rooms.sample_names(NAMES[:5], 40, seed=1) == sorted(NAMES[:5])


def test_a_sample_is_uniform_over_the_room_not_its_first_names():
    # Over many seeds every name is picked about size/len times; a draw from the cheapest or first names
    # (what a run stopped part way judges) would leave the last names out.
    counts = Counter(name for seed in range(400) for name in mutation_rooms.sample_names(NAMES, 40, seed))

    expected = 400 * 40 / len(NAMES)
    assert set(counts) == set(NAMES)
    assert all(0.5 * expected < count < 1.5 * expected for count in counts.values())
    assert sum(counts[name] for name in NAMES[100:]) == pytest.approx(400 * 20, rel=0.1)


@pytest.mark.parametrize(("killed", "trials", "low", "high"), [
    (38, 40, 0.835, 0.986),  # the Wilson interval of 95%, by hand: centre (p + z²/2n) / (1 + z²/n)
    (40, 40, 0.912, 1.0),
    (0, 10, 0.0, 0.278),
    (20, 40, 0.352, 0.648),
])
def test_the_score_interval_is_wilsons_95_percent_interval(killed, trials, low, high):
    interval = mutation_rooms.wilson_interval(killed, trials)

    assert interval == pytest.approx((low, high), abs=0.001)


def test_a_sample_with_nothing_judged_says_nothing_of_the_score():
    assert mutation_rooms.wilson_interval(0, 0) == (0.0, 1.0)
