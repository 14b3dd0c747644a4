"""tallies.py: a line of counts is one fact, stated by every count in its order or each beside its own label
(issue 46, round nine: blind_15's `terraform plan` counts were never extracted)."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.facts import FactKind
from compaction_app.engine.retention.statements import structured
from compaction_app.engine.retention.tallies import is_tally_setting, states_tally, tally_of, tally_text
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output


@pytest.mark.parametrize(("line", "counts"), [
    ("Plan: 4 to add, 1 to change, 2 to destroy.", ((4, "add"), (1, "change"), (2, "destroy"))),
    ("1 failed, 14 passed in 0.31s", ((1, "failed"), (14, "passed"))),
    ("found 7 vulnerabilities (2 low, 4 moderate, 1 high)",
     ((7, "vulnerabilities"), (2, "low"), (4, "moderate"), (1, "high"))),
    ("took 3 tries and 1,204 restarts", ((3, "tries"), (1204, "restarts"))),
])
def test_a_line_of_counts_is_a_tally_in_its_order(line, counts):
    assert tally_of(line) == counts


def test_a_second_word_of_a_label_may_sit_before_the_comma():
    line = " 3 files changed, 10 insertions(+), 2 deletions(-)"
    assert tally_of(line) == ((3, "files"), (10, "insertions"), (2, "deletions"))
    assert tally_text(line) == "3 files changed, 10 insertions(+), 2 deletions(-)"


@pytest.mark.parametrize("line", [
    "waited 5 seconds and 3 minutes",  # a duration, not counts
    "Le plan ajoute 4 ressources, en modifie 1",  # one count, then prose
    "40 passed in 12.31s",  # one count
    "4 to add but then 2 to destroy",  # other words between the counts
])
def test_a_line_without_two_counts_side_by_side_is_no_tally(line):
    assert tally_of(line) == ()
    assert tally_text(line) is None


VALUE = "4 to add, 1 to change, 2 to destroy"


@pytest.mark.parametrize(("text", "held"), [
    ("+4 ~1 -2", True),
    ("ajoute 4 ressources, en modifie 1 et en détruit 2", True),
    ("2 to destroy, 4 to add, 1 to change", True),  # another order, each count beside its own label
    ("+2 ~1 -4", False),  # another order, no labels: 2 added and 4 destroyed
    ("2 to add, 1 to change, 4 to destroy", False),
    ("+4, nichts wird gelöscht", False),
])
def test_a_tally_is_stated_in_its_order_or_each_count_beside_its_label(text, held):
    assert states_tally(text, VALUE) is held


@pytest.mark.parametrize(("text", "held"), [
    ("destroy 2; add 4; change 1", True),  # each label before its count, in another order
    ("destroy: 4 add: 2 change: 1", False),
])
def test_a_tally_is_stated_by_each_label_written_before_its_count(text, held):
    # Issue 43, retention seed 5103: the label-first form's count read as None raised here.
    assert states_tally(text, VALUE) is held


def test_a_tally_read_from_an_output_is_a_setting_named_by_the_words_before_it():
    (statement,) = structured(["Plan: 4 to add, 1 to change, 2 to destroy."])
    assert (statement.name, statement.value) == ("plan_counts", VALUE)
    assert is_tally_setting(statement.name) and is_tally_setting("counts") and not is_tally_setting("discounts")


PLAN = output("terraform plan -no-color -var-file=env/stage-7.tfvars",
              "Terraform will perform the following actions:\n\n  # aws_instance.ingest[7] will be created\n"
              "  + resource \"aws_instance\" \"ingest\" {\n    }\n\nPlan: 4 to add, 1 to change, 2 to destroy.")


@pytest.mark.parametrize(("claim", "held"), [
    ("- tf plan stage-7: +4 ~1 -2", True),
    ("- Le plan Terraform de stage-7 ajoute 4 ressources, en modifie 1 et en détruit 2.", True),
    ("- tf plan stage-7: +2 ~1 -4", False),
    ("- tf plan stage-8: +4 ~1 -2", False),
    ("- tf plan stage-7: +4, nichts wird gelöscht", False),
])
def test_a_plans_counts_are_kept_in_translation_and_lost_when_swapped(claim, held):
    assert kept(PLAN, claim, FactKind.VALUE, "4 to add") is held
