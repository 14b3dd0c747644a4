"""values.py: dates, versions, numbers, clocks and addresses in normal form. The first tests were written from the
survivors of the retention room's mutation samples (issue 43); the rest state each rule with its boundaries."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.values import (
    address_of,
    clock_seconds,
    date_of,
    dates,
    number_of,
    numbers,
    numbers_agree,
    states_address,
    typed_values,
    version_of,
    versions,
)


def test_a_host_and_port_without_a_scheme_is_an_address():
    assert address_of("db-3.internal:5432") == ("db-3.internal", "5432", ())
    assert address_of("0.0.0.0:9020") == ("", "9020", ())


def test_an_address_on_a_wildcard_host_is_stated_by_its_port_alone():
    # A wildcard host is "": "listening on 9020" states `0.0.0.0:9020`, as "port 9020" does.
    assert states_address("the api is listening on 9020", "", "9020")
    assert not states_address("the api is listening on 9021", "", "9020")


# The rules of values.py, each with its boundaries: what a value is in normal form, whatever its writer's format.

@pytest.mark.parametrize(("text", "day"), [
    ("2027-03-14", "2027-03-14"),
    ("2027/3/4", "2027-03-04"),
    ("notAfter=Mar 14 09:30:00 2027 GMT", "2027-03-14"),
    ("March 14, 2027", "2027-03-14"),
    ("Sept 3rd 2027", "2027-09-03"),
    ("Dec. 1 2027", "2027-12-01"),
    ("jan 31 2027", "2027-01-31"),
    ("14 March 2027", "2027-03-14"),
    ("14-Mar-2027", "2027-03-14"),
    ("3rd Sep, 2027", "2027-09-03"),
])
def test_a_date_in_any_format_is_its_iso_day(text, day):
    assert dates(text) == frozenset({day})
    assert date_of(text) == day


@pytest.mark.parametrize("text", ["on 2027-13-01", "2027-02-32", "2027-00-10", "1.2027-03-14", "2027-03-145",
                                  "Foo 14 2027", "12 Foo 2027"])
def test_a_date_with_no_such_month_or_day_or_glued_to_digits_is_no_date(text):
    assert dates(text) == frozenset()


def test_a_value_is_one_day_only_when_it_names_one():
    assert date_of("2027-03-14 or March 14, 2027") == "2027-03-14"  # one day in two formats
    assert date_of("from 2027-03-14 to 2027-03-15") is None
    assert date_of("no date here") is None


@pytest.mark.parametrize(("text", "found"), [
    ("go1.22.7", {"1.22.7"}),
    ("v16.3", {"16.3"}),
    ("version 16.3", {"16.3"}),
    ('version: "16.3', {"16.3"}),
    ("release: 2.4", {"2.4"}),
    ("x 1.2.3", {"1.2.3"}),
    ("1.2.3.4", {"1.2.3.4"}),
    ("1.22", set()),  # one dot with no prefix nor version word: a decimal
    ("psql 16.3", set()),
    ("1.2.3.4.5", set()),  # five parts: no version
])
def test_a_version_is_two_dots_or_one_after_a_prefix_or_the_word_version(text, found):
    assert versions(text) == frozenset(found)


@pytest.mark.parametrize(("value", "version"), [
    ("go1.22.7", "1.22.7"), ("v16.3", "16.3"), ("V16.3", "16.3"), ("GO1.22", "1.22"), ("21.0.4+7-Ubuntu", "21.0.4"), ("(1.22.7)", "1.22.7"),
    ("1.2.3-rc1", "1.2.3"), ("release-2.4.1", "2.4.1"),
    ("16.3", None), ("1.22", None), ("abc", None), ("1.2.3.4.5", None), ("go", None),
])
def test_a_value_is_a_version_by_its_dotted_digits_a_bare_one_needing_two_dots(value, version):
    assert version_of(value) == version


@pytest.mark.parametrize(("value", "number"), [
    ("1,234", (1234.0, 0.5, False, 4)),
    ("1_234", (1234.0, 0.5, False, 4)),
    ("1.2k", (1200.0, 50.0, False, 2)),
    ("18.2M", (18.2e6, 0.05e6, False, 3)),
    ("18.2 million", (18.2e6, 0.05e6, False, 3)),
    ("3 thousand", (3000.0, 500.0, False, 1)),
    ("2bn", (2e9, 0.5e9, False, 1)),
    ("5mn", (5e6, 0.5e6, False, 1)),
    ("91.31%", (91.31, 0.005, True, 4)),
    ("91.31 %", (91.31, 0.005, True, 4)),
    ("0.9131", (0.9131, 0.00005, False, 4)),
    ("-3.5", (-3.5, 0.05, False, 2)),
    ("1200", (1200.0, 0.5, False, 2)),  # an integer's trailing zeros are not significant
    ("100.0", (100.0, 0.05, False, 4)),  # a decimal's are
    ("007", (7.0, 0.5, False, 1)),  # leading zeros never are
    (" 42 ", (42.0, 0.5, False, 2)),
])
def test_a_number_is_its_value_and_the_rounding_and_digits_its_writer_gave_it(value, number):
    value_, half, percent, digits = number_of(value)
    assert (value_, percent, digits) == (number[0], number[2], number[3])
    assert half == pytest.approx(number[1])


@pytest.mark.parametrize("value", ["12 apples", "512MB", "1.2.3", "v2", "abc"])
def test_a_value_with_more_than_one_number_or_a_unit_is_no_plain_number(value):
    assert number_of(value) is None


def test_the_numbers_of_a_text_leave_out_a_number_glued_to_a_unit_not_a_scale():
    assert [n[0] for n in numbers("12 apples, 512MB, 512M and 0.5")] == [12.0, 512e6, 0.5]


@pytest.mark.parametrize(("wanted", "said", "agree"), [
    ("0.9131", "0.9131", True),
    ("0.9131", "0.913", True),
    ("0.9131", "0.91", True),  # two significant digits are enough
    ("0.9131", "0.9", False),  # one is not
    ("0.9131", "0.92", False),  # a neighbour at the restatement's precision
    ("0.9131", "91.31%", True),  # a fraction is its percentage
    ("0.9131", "91.3%", True),
    ("0.9131", "91%", True),
    ("92%", "0.92", True),
    ("0.91", "91.4%", True),  # a fraction's rounding, as a percentage: 0.91 is 90.5% to 91.5%
    ("0.91", "91.503%", False),
    ("91.4%", "0.91", True),
    ("91.503%", "0.91", False),
    ("92%", "0.93", False),
    ("1.25", "1.3", True),  # exactly half the coarser unit away
    ("1.24", "1.3", False),  # just over it
    ("18,204,551", "18.2M", True),
    ("18,204,551", "18.3M", False),
    ("1000", "1k", True),
    ("1,000,000", "1000000", True),
    ("5", "5", True),
    ("5", "6", False),
])
def test_a_number_agrees_with_its_restatement_within_the_coarser_rounding(wanted, said, agree):
    assert numbers_agree(number_of(wanted), number_of(said)) is agree


@pytest.mark.parametrize(("text", "seconds"), [
    ("1:12:09", [(4329.0, 0.5)]),
    ("took 12:09", [(729.0, 0.5)]),
    ("1:02.5", [(62.5, 0.05)]),
    ("at 12:09:30.25", [(43770.25, 0.005)]),
    ("3:5", []),  # seconds are two digits
    ("10:11:07:01", []),  # four fields are no clock
])
def test_a_clock_is_a_number_of_seconds_with_its_last_digits_rounding(text, seconds):
    assert [(s, pytest.approx(h)) for s, h in clock_seconds(text)] == seconds


@pytest.mark.parametrize(("value", "address"), [
    ("postgresql://u@db-3.internal:5432/ledger", ("db-3.internal", "5432", ())),
    ("redis://cache-10:6379/1", ("cache-10", "6379", ("1",))),
    ("http://localhost:8080", ("localhost", "8080", ())),
    ("https://example.com", ("example.com", None, ())),
    ("https://api.example.com/v2/orders/42", ("api.example.com", None, ("v2", "42"))),
    ("10.0.0.5:6379", ("10.0.0.5", "6379", ())),
    ("XEN-3.internal:5432", ("xen-3.internal", "5432", ())),  # a host in any case
    ('"db-3.internal:5432"', ("db-3.internal", "5432", ())),
    ("[::]:9020", ("", "9020", ())),
    ("*:80", ("", "80", ())),
    ("a:1", None),  # a pair, not an address
    ("localhost:8080", None),  # no scheme and no dot: a name and a number
    ("db-3.internal", None),
])
def test_an_address_is_its_host_its_port_and_its_paths_numbered_parts(value, address):
    assert address_of(value) == address


@pytest.mark.parametrize(("text", "held"), [
    ("db-3.internal:5432 is up", True),
    ("db-3.internal port 5432", True),
    ("db-3.internal.example:5432", False),  # another host, longer
    ("xdb-3.internal:5432", False),
    ("db-3.internal on 5433", False),
    ("db-3.internal 5432", False),  # a port is said next to its host or as "port N"
])
def test_an_address_is_stated_by_its_whole_host_and_its_port_beside_it(text, held):
    assert states_address(text, "db-3.internal", "5432") is held


def test_an_address_without_a_port_is_stated_by_its_host_and_with_a_path_by_its_numbered_parts():
    assert states_address("db-3.internal", "db-3.internal", None)
    assert states_address("cache-10:6379 db 1", "cache-10", "6379", ("1",))
    assert states_address("is redis://cache-10:6379/1.", "cache-10", "6379", ("1",))  # the full stop is no part
    assert not states_address("cache-10:6379 db 2", "cache-10", "6379", ("1",))
    assert states_address("see api.example.com/v2/orders/42", "api.example.com", None, ("v2", "42"))
    assert not states_address("see api.example.com/v3/orders/42", "api.example.com", None, ("v2", "42"))


def test_a_wildcard_address_is_stated_by_its_port_alone_not_by_a_longer_number():
    assert states_address("port: 9020", "", "9020")
    assert states_address("*:9020", "", "9020")
    assert not states_address("90201", "", "9020")


def test_a_line_states_values_by_their_form_each_with_where_it_starts():
    line = "see https://x.io/a and 10.0.0.5:6379 on 2027-03-14, 512 MiB, v1.2.3, id abc123, 12,345 rows"
    assert typed_values(line) == [(4, "https://x.io/a"), (23, "10.0.0.5:6379"), (40, "2027-03-14"),
                                  (52, "512 MiB"), (61, "v1.2.3"), (72, "abc123"), (80, "12,345")]
    assert typed_values("took 1234 ms for 3.5 of 12") == [(5, "1234 ms"), (17, "3.5")]
    assert typed_values("docs at (https://x.io/a).") == [(9, "https://x.io/a")]  # a sentence's closing marks
    assert typed_values("key: abc1 =") == []  # an id before `=` is a name
