"""Round seven's wording rules (issue 46): a measurement's spread (`331.4 ms ± 9.3 ms`) is part of it, not a second
value of its name; a command's option and its number name what was measured ("batch 31 takes 331 ms" for
`hyperfine 'node score.js --batch 31'`); a user's window is kept in other clock formats and weekday forms ("6:00" for
06:00, "Mon–Wed"), a range is a restriction of its own, and each weekday the user named must be stated."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from compaction_app.engine.retention.facts import FactKind, extract_facts
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output

BENCH = output("hyperfine --runs 10 'python -m render --pages 64'",
               "Benchmark 1: python -m render --pages 64\n"
               "  Time (mean ± σ):     812.6 ms ±  14.2 ms    [User: 790.1 ms, System: 20.3 ms]")


@pytest.mark.parametrize(("claim", "held"), [
    ("- rendering 64 pages takes 813 ms on average", True),
    ("- pages 64: 0.81 s per run", True),
    ("- rendering 64 pages takes 14 ms on average", False),
    ("- pages 65: 813 ms per run", False),
])
def test_a_measurement_is_named_by_its_commands_option_and_keeps_its_spread_out(claim, held):
    assert kept(BENCH, claim, FactKind.VALUE, "812.6") is held


WINDOW = [user_message("About the ledger. Migrations of ledger 7 run only between 02:00 and 04:30 UTC, Tuesday to "
                       "Friday.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- ledger 7 migrations: 02:00–04:30 UTC, Tue–Fri", True),
    ("- Ledger 7 migrations may only run from 2:00 to 4:30 UTC, Tuesday through Friday.", True),
    ("- ledger 7 migrations: 02:00–05:30 UTC, Tue–Fri", False),
    ("- Ledger 7 migrations run between 02:00 and 04:30 UTC.", False),  # the weekdays dropped
    ("- Ledger 7 migrations: 02:00, 04:30 UTC, Tuesday, Friday.", False),  # no window left: the restriction dropped
])
def test_a_users_window_is_kept_in_other_clock_and_weekday_forms(claim, held):
    assert kept(WINDOW, claim, FactKind.CONSTRAINT, "Migrations of ledger 7") is held


def test_a_spread_is_not_a_value_of_its_own():
    facts = extract_facts(BENCH)
    assert any("812.6" in f.text for f in facts if f.kind is FactKind.VALUE)
    assert not any("14.2" in f.text for f in facts if f.kind is FactKind.VALUE)
