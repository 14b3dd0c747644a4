"""Values no specific rule reads (issue 46, round six): a short output's line of a few values is one fact, kept only
when a summary states all of them (a schedule by its minute, hour and script; a version range by both bounds); a
list of measurements gives each value its own fact, named by the list's label or the file it was read from; a
user's sentence that sets an amount of money, a rate or a quantity is a constraint whatever its verb, compared by
the amount. Each test scores a history and a summary through `score_compaction` and asks what it says of one
fact."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from compaction_app.engine.retention.facts import FactKind
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output

CRON = output("crontab -l | grep rotate", "40 2 * * * /srv/jobs/rotate-77.sh >> /var/log/rotate.log 2>&1")
RANGE = output("jq -r .engines.node services/portal-8/package.json", ">=20.11 <23")


@pytest.mark.parametrize(("history", "tag", "claim", "held"), [
    (CRON, "rotate-77.sh", "- rotate-77.sh is scheduled as `40 2 * * *`", True),
    (CRON, "rotate-77.sh", "- cron runs rotate-77.sh every day at 02:40", True),
    (CRON, "rotate-77.sh", "- rotate-77.sh runs from cron", False),
    (CRON, "rotate-77.sh", "- rotate-77.sh is scheduled as `45 2 * * *`", False),
    (RANGE, ">=20.11", "- portal-8 accepts Node >=20.11 <23", True),
    (RANGE, ">=20.11", "- portal-8 runs on Node 20.11 or newer, below 23", True),
    (RANGE, ">=20.11", "- portal-8 accepts Node >=20.11", False),
    (RANGE, ">=20.11", "- portal-8 accepts Node >=20 <23", False),
])
def test_a_short_line_of_a_few_values_is_kept_by_all_of_them(history, tag, claim, held):
    assert kept(history, claim, FactKind.VALUE, tag) is held


LOAD = output("hey-report soak-42.json", "Summary      [count, rps]  9000, 150.03\n"
                                             "Durations    [min, p50, p95, max]  2.2ms, 18.6ms, 244.7ms, 2.1s")


@pytest.mark.parametrize(("claim", "held"), [
    ("- soak-42: p95 about 245 ms", True),
    ("- the p95 duration of soak-42 is 0.245 s", True),
    ("- soak-42: p95 18.6 ms", False),
    ("- soak-42 was run", False),
])
def test_a_list_of_measurements_gives_each_value_its_own_fact(claim, held):
    assert kept(LOAD, claim, FactKind.VALUE, "244.7ms") is held


BUDGET = [user_message("Quick note on search 31. Search 31 has to stay below USD 2,500 a month in the cloud.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- Search 31 has to stay below $2,500 a month in the cloud.", True),
    ("- search 31 budget: max 2500 USD per month", True),
    ("- Search 31 has to stay below $3,500 a month in the cloud.", False),
    ("- search 31 budget: 2500 USD per month", False),  # the limit dropped: a cost, not a bound
    ("- search 31 is on the cloud", False),
])
def test_a_users_amount_is_a_constraint_compared_by_its_number(claim, held):
    assert kept(BUDGET, claim, FactKind.CONSTRAINT, "Search 31 has to stay") is held


SERIAL = output("openssl x509 -serial -noout -in certs/edge-5.pem", "serial=5C0B7E91A2D4F3E8")


@pytest.mark.parametrize(("claim", "held"), [
    ("- certs/edge-5.pem has serial 5c:0b:7e:91:a2:d4:f3:e8", True),
    ("- certs/edge-5.pem has serial 5C0B7E91A2D4F3E8", True),
    ("- certs/edge-5.pem has serial 5c:0b:7e:91:a2:d4:f3:00", False),
])
def test_a_hex_serial_is_the_same_written_in_pairs(claim, held):
    assert kept(SERIAL, claim, FactKind.VALUE, "5C0B7E91A2D4F3E8") is held
