"""The structural check's rules of round ten (issue 46): general readers for the causes of blind_16's misses (a
number written with a decimal comma, a duration's one-letter unit in a correction said in other units, a rate named
with its time unit after a slash, a rate said with "por"/"par"/"pro"). Each test plants one history and one summary
and asks what the score says of one fact, or reads through the public reader it names."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from compaction_app.engine.retention.facts import FactKind
from compaction_app.engine.retention.quantities import quantity_of, rates, states_quantity
from compaction_app.engine.retention.statements import DASH_RULE, Statement, rate_line, slash_pairs
from compaction_app.engine.retention.values import comma_decimals
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output


@pytest.mark.parametrize(("text", "found"), [
    ("carga 0,75", [(0.75, 0.005, False, 2)]), ("Last 12,5 GiB", [(12.5, 0.05, False, 3)]),
    ("ports 80, 443", []), ("v1.2,3", []), ("3,4,5", []),
])
def test_a_number_with_a_decimal_comma_is_read_as_a_decimal(text, found):
    assert list(comma_decimals(text)) == found


LOAD = output("ssh db-3 uptime", " 09:01:10 up 3 days,  1:02,  1 user,  load average: 0.42, 0.75, 0.93")


@pytest.mark.parametrize(("claim", "held"), [
    ("- db-3: Last über 15 Minuten 0,93", True),
    ("- db-3: Last über 15 Minuten 0,42", False),
])
def test_a_value_restated_with_a_decimal_comma_is_kept(claim, held):
    assert kept(LOAD, claim, FactKind.VALUE, "0.93") is held


@pytest.mark.parametrize(("text", "held"), [
    ("lease_ttl = 90m", True), ("lease_ttl 1,5 h", True), ("lease_ttl 1.5 h", True), ("5400 s", True),
    ("lease_ttl = 30m", False), ("lease_ttl 3 h", False), ("90 MiB", False),
])
def test_a_one_letter_duration_unit_states_a_wanted_duration(text, held):
    # "90m" in an ini file is minutes; alone it is read as a size, so it is read as minutes only against a duration.
    assert states_quantity(text, quantity_of("90 minutes")) is held



def test_a_glued_m_is_still_a_size_against_a_wanted_size():
    assert states_quantity("heap 512m", quantity_of("512 MiB"))
    assert not states_quantity("heap 512m", quantity_of("512 KiB"))


CORRECTED = [*output("grep -n ttl conf/lease-3.ini", "4:lease_ttl = 30m"),
             user_message("30 minutes drops long uploads, set lease_ttl on lease-3 to 90 minutes from now on")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- lease-3: lease_ttl = 90m", True), ("- lease-3: lease_ttl 1,5 h (was 30 min)", True),
    ("- lease-3: lease_ttl = 30m", False),
])
def test_a_setting_corrected_in_chat_is_kept_in_the_configs_own_unit_or_in_hours(claim, held):
    assert kept(CORRECTED, claim, FactKind.VALUE, "lease_ttl") is held


@pytest.mark.parametrize(("line", "found"), [
    ("Requests/sec:   8412.06", Statement("Requests/sec", "8412.06/sec")),
    ("ops/s 220", Statement("ops/s", "220/s")),
    ("Transfer/sec:      3.95MB", None), ("src/app/main.py: 12", None),
])
def test_a_rate_named_with_its_time_unit_after_a_slash_is_a_rate_statement(line, found):
    assert rate_line(line) == found


BENCH = output("wrk -t2 -c32 -d10s http://api-5.internal/search",
               "  2 threads and 32 connections\n  84121 requests in 10.00s, 20.1MB read\n"
               "Requests/sec:   8412.06\nTransfer/sec:      2.01MB")


@pytest.mark.parametrize(("claim", "held"), [
    ("- api-5 /search: 8412 req/s under wrk", True), ("- api-5 /search: 504,700 requests/min", True),
    ("- api-5 /search: 8412,1 pedidos por segundo", True),
    ("- api-5 /search: 4206 req/s under wrk", False), ("- api-5 /search: holds the load", False),
])
def test_a_tools_rate_is_kept_in_any_time_unit_and_lost_by_another_number(claim, held):
    assert kept(BENCH, claim, FactKind.VALUE, "8412.06") is held


@pytest.mark.parametrize(("text", "per_second"), [
    ("1270 pedidos por segundo", 1270), ("600 requêtes par minute", 10), ("7200 Anfragen pro Stunde", 2),
    ("900 verzoeken per minuut", 15),
])
def test_a_rate_said_with_por_par_or_pro_is_compared_per_second(text, per_second):
    (rate,) = rates(text)
    assert rate.base == pytest.approx(per_second)


@pytest.mark.parametrize(("line", "found"), [
    ("rtt min/avg/max/mdev = 8.113/14.231/31.400/3.207 ms",
     [("min", "8.113 ms"), ("avg", "14.231 ms"), ("max", "31.400 ms"), ("mdev", "3.207 ms")]),
    ("p50/p95/p99: 12/48/97", [("p50", "12"), ("p95", "48"), ("p99", "97")]),
    ("min/avg/max = 1/2 ms", []), ("see docs/api/v2: 3/4", []),
])
def test_slash_separated_names_and_values_are_one_statement_per_name(line, found):
    assert [(s.key, s.value) for s in slash_pairs(line)] == found


PING = output("ping -c 5 db-7", "5 packets transmitted, 5 received, 0% packet loss, time 4005ms\n"
                                "rtt min/avg/max/mdev = 8.113/14.231/31.400/3.207 ms")


@pytest.mark.parametrize(("claim", "held"), [
    ("- ping db-7: avg 14.2 ms", True), ("- ping db-7: avg 31.4 ms", False), ("- ping db-7: reachable", False),
])
def test_each_of_several_numbers_on_one_line_is_its_own_fact(claim, held):
    assert kept(PING, claim, FactKind.VALUE, "14.231") is held


COVERAGE = output("coverage report", "Name                Stmts   Miss  Cover\n" + "-" * 45 + "\n"
                                     "billing/tax.py        640     12    98%\n" + "-" * 45 + "\n"
                                     "TOTAL                5120    410    92%")


@pytest.mark.parametrize(("claim", "held"), [
    ("- coverage: TOTAL 92% covered (410 of 5120 statements missed)", True),
    ("- coverage: TOTAL 410% covered", False), ("- coverage: TOTAL 83% covered", False),
])
def test_a_table_drawn_with_dashed_rules_is_read_as_a_table(claim, held):
    assert kept(COVERAGE, claim, FactKind.VALUE, "92%") is held


def test_a_dashed_rule_is_no_row_and_psqls_rule_stays_its_bar_tables():
    assert DASH_RULE.fullmatch("-------- ------") and DASH_RULE.fullmatch("=====")
    assert not DASH_RULE.fullmatch("--------+------") and not DASH_RULE.fullmatch("--")
