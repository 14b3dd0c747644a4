"""quantities.py: numbers with units. The first tests were written from the survivors of the retention room's
mutation samples (issue 43); the rest state each rule with its boundaries."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.quantities import (
    BYTES,
    PERCENT,
    SECONDS,
    quantities,
    quantity_of,
    rate_spans,
    rates,
    states_quantity,
)


def test_a_unit_glued_to_and_is_no_part_of_a_duration_and_the_rest_is_still_read():
    # "1hand 30s" (a space missed): "hand" is no unit, so there is no 1 h 30 s duration, only the 30 s after it.
    assert [(q.dimension, q.base) for q in quantities("done in 1hand 30s")] == [(SECONDS, 30.0)]
    assert [(q.dimension, q.base) for q in quantities("done in 1h and 30s")] == [(SECONDS, 3630.0)]


def test_a_duration_in_several_units_is_stated_by_its_bare_number_in_its_last_unit():
    # `1h30m` is 90 minutes: "took 90" leaves the unit implicit, as a one-unit quantity's bare number does.
    wanted = quantity_of("1h30m")
    assert states_quantity("the backfill took 90", wanted)
    assert not states_quantity("the backfill took 80", wanted)


# The rules of quantities.py, each with its boundaries.

GIB, MIB = 2**30, 2**20


@pytest.mark.parametrize(("text", "found"), [
    ("1.8 GiB", [(BYTES, 1.8 * GIB, 0.05 * GIB)]),
    ("1843 MiB", [(BYTES, 1843 * MIB, 0.5 * MIB)]),
    ("1.5 kb", [(BYTES, 1500.0, 50.0)]),
    ("1432Mi", [(BYTES, 1432 * MIB, 0.5 * MIB)]),  # Kubernetes' binary suffix
    ("512M", [(BYTES, 512 * MIB, 0.5 * MIB)]),  # a single letter glued to its number is a unit
    ("3,4 Go", [(BYTES, 3.4e9, 0.05e9)]),  # French: a decimal comma, octets
    ("5To", [(BYTES, 5e12, 0.5e12)]),
    ("1,843 ms", [(SECONDS, 1.843, 0.0005)]),  # thousands, not a decimal comma
    ("300 µs", [(SECONDS, 0.0003, 0.0000005)]),
    ("90 s", [(SECONDS, 90.0, 0.5)]),
    ("90 seconds", [(SECONDS, 90.0, 0.5)]),
    ("12 sekunden", [(SECONDS, 12.0, 0.5)]),
    ("2h", [(SECONDS, 7200.0, 1800.0)]),
    ("2 days", [(SECONDS, 172800.0, 43200.0)]),
    ("10%", [(PERCENT, 10.0, 0.5)]),
    ("10 %", [(PERCENT, 10.0, 0.5)]),
])
def test_a_quantity_is_its_value_and_rounding_in_its_dimensions_base_unit(text, found):
    assert [(q.dimension, pytest.approx(q.base), pytest.approx(q.half_step)) for q in quantities(text)] == found


@pytest.mark.parametrize("text", ["512 M", "5 m", "2 h", "5 to 10", "7 foo", "the 3 of us"])
def test_a_single_letter_unit_apart_from_its_number_or_an_unknown_word_is_no_quantity(text):
    assert quantities(text) == []


@pytest.mark.parametrize(("text", "seconds", "half"), [
    ("2m14.310s", 134.31, 0.0005),  # bash's time: m is minutes in a duration
    ("1h2m3.5s", 3723.5, 0.05),
    ("2 min 14 s", 134.0, 0.5),
    ("1 h 5 min", 3900.0, 30.0),  # rounded as its last part
])
def test_a_duration_in_several_units_largest_first_is_one_quantity(text, seconds, half):
    (found,) = quantities(text)
    assert (found.dimension, found.base, found.half_step) == (SECONDS, pytest.approx(seconds), pytest.approx(half))
    assert quantity_of(f" {text} ").base == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["14s 2m", "2m 3m"])
def test_units_smallest_first_or_repeated_are_no_one_duration(text):
    assert len(quantities(text)) == 2


@pytest.mark.parametrize(("wanted", "said", "agree"), [
    ("1.8 GiB", "1843 MiB", True),
    ("1.8 GiB", "1843 KiB", False),
    ("1843 MiB", "1932 MB", True),  # across units a conversion rounds once more: half a percent
    ("1843 MiB", "1945 MB", False),
    ("1.8 GiB", "1.84 GiB", True),
    ("1.8 GiB", "1.9 GiB", False),
    ("90 s", "1.5 min", True),
    ("90 s", "90 MB", False),  # another dimension
    ("100 ms", "0.1 s", True),
    ("1000 ms", "1001 ms", False),  # in one unit only the writer's rounding
    ("1000 ms", "1.0055 s", True),
    ("1000 ms", "1.006 s", False),
    ("10%", "10 percent", True),
])
def test_two_quantities_agree_within_their_rounding_and_half_a_percent_across_units(wanted, said, agree):
    assert quantity_of(wanted).agrees(quantity_of(said)) is agree


@pytest.mark.parametrize("text", ["1843 MiB and 2 GiB", "about 90 s", "90", "abc", "5 m"])
def test_a_value_is_a_quantity_only_when_it_is_one_number_with_a_unit(text):
    assert quantity_of(text) is None


@pytest.mark.parametrize(("text", "held"), [
    ("peak 1843", True),  # the unit left implicit
    ("peak 1843.0", True),
    ("peak 1.8 GiB", True),
    ("1843MiB", True),
    ("peak 1843 KB", False),  # a wrong unit is not an implicit one
    ("peak 1844", False),
])
def test_a_quantity_is_stated_in_any_unit_that_agrees_or_by_its_bare_number(text, held):
    assert states_quantity(text, quantity_of("1843 MiB")) is held


@pytest.mark.parametrize(("text", "held"), [
    ("finished in 1:12:09", True), ("finished in 1:12:10", False), ("in 1:12:09.6", False)])
def test_a_duration_is_stated_by_a_clock_within_its_rounding(text, held):
    assert states_quantity(text, quantity_of("4329 s")) is held


@pytest.mark.parametrize(("text", "per_second"), [
    ("170 requests per second", 170.0),
    ("10,200 requests/min", 170.0),
    ("175 req/s", 175.0),
    ("500 rps", 500.0),
    ("20 qps", 20.0),
    ("12 per hour", 12 / 3600),
    ("6 jobs/h", 6 / 3600),
    ("3 deploys a day", 3 / 86400),
])
def test_a_rate_is_compared_per_second(text, per_second):
    assert [r.base for r in rates(text)] == [pytest.approx(per_second)]


@pytest.mark.parametrize("text", ["100 EUR per day", "100 EUR/day", "170 ms"])
def test_money_per_time_or_a_duration_is_no_rate(text):
    assert rates(text) == ()


def test_a_rates_span_is_where_it_is_written():
    assert rate_spans("at 175 req/s now") == [(3, 12)]


@pytest.mark.parametrize(("text", "held"), [
    ("170 requests per second", True),
    ("10,200 requests/min", True),
    ("10,300 requests/min", False),
    ("at 170/s", True),
    ("about 170", True),  # its number with nothing after it
    ("170 ms", False),  # its number with another unit
    ("171", False),
])
def test_a_rate_is_stated_in_any_time_unit_or_by_its_bare_number(text, held):
    (wanted,) = rates("170 requests per second")
    assert states_quantity(text, wanted) is held
