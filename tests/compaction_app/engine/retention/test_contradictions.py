"""contradictions.py: claims that use a fact's own words to say the opposite. The first test was written from a
survivor of the retention room's mutation samples (issue 43); the rest state each rule with its boundaries."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.contradictions import (
    choice,
    claims_done,
    drops_negation,
    prohibits,
    turns_choice_round,
)


def test_a_step_whose_verb_ends_in_consonant_y_is_claimed_done_by_its_ied_past():
    assert claims_done("retry the failed upload", "retried the failed upload")
    assert not claims_done("retry the failed upload", "the failed upload")


@pytest.mark.parametrize(("text", "chosen", "rejected"), [
    ("use Celery instead of Redis streams", {"celery"}, {"redi", "stream"}),
    ("Celery rather than Redis streams", {"celery"}, {"redi", "stream"}),
    ("Celery in place of Redis", {"celery"}, {"redi"}),
    ("Celery, not Redis", {"celery"}, {"redi"}),
    ("chose Celery over Redis", {"chos", "celery"}, {"redi"}),
    ("we dropped Redis in favor of Celery", {"celery"}, {"drop", "redi"}),  # the chosen side after the marker
])
def test_a_choice_is_read_as_its_chosen_and_rejected_sides(text, chosen, rejected):
    assert choice(text) == (frozenset(chosen), frozenset(rejected))


@pytest.mark.parametrize("text", [
    "send it over HTTP",  # "over" without a verb of choosing
    "Celery. instead of Redis",  # a side does not run past its clause
    "in favour of Celery, Redis dropped",
    "nothing here",
])
def test_a_text_without_both_sides_of_a_choice_states_none(text):
    assert choice(text) is None


@pytest.mark.parametrize(("claim", "turned"), [
    ("Redis streams for the export queue, not Celery", True),
    ("Celery for the export queue, not Redis streams", False),
    ("Celery", False),  # no choice in the claim
])
def test_a_choice_is_turned_round_when_the_claim_chooses_what_the_fact_rejected(claim, turned):
    assert turns_choice_round("use Celery instead of Redis streams", claim) is turned
    assert not turns_choice_round("use Celery", claim)  # no choice in the fact


@pytest.mark.parametrize(("text", "restricts"), [
    ("don't run migrations", True),
    ("it’s not ok", True),  # a typographic apostrophe
    ("keep the field names as they are", True),
    ("leave it alone", True),
    ("frozen API", True),
    ("must finish before 06:00", True),
    ("use pnpm only", True),
    ("muss fertig sein", True),  # in the summary's language
    ("at least 3", True),
    ("max 1200 EUR", True),
    ("< €1,200/month", True),
    ("06:00–09:30", True),  # a range bounds both ways
    ("from 6:00 to 9:30", True),
    ("between 2 and 5", True),
    ("run migrations", False),
    ("npm install is fine", False),
    ("the --no-verify flag", False),  # a flag's "no" is no negative
])
def test_a_text_restricts_by_a_negative_a_preservation_an_obligation_or_a_bound(text, restricts):
    assert prohibits(text) is restricts


def test_a_prohibition_is_dropped_by_a_claim_that_restricts_nothing():
    assert drops_negation("don't run migrations against prod-20", "migrations go to prod-20 now")
    assert not drops_negation("don't run migrations against prod-20", "never run migrations on prod-20")
    assert not drops_negation("run migrations against prod-20", "migrations go to prod-20 now")


@pytest.mark.parametrize(("step", "claim", "done"), [
    ("backfill invoice_lines", "Already done: backfilled invoice_lines", True),
    ("backfill invoice_lines", "backfilled invoice_lines", True),  # the step's verb in the past
    ("run tests", "ran tests", True),  # irregular
    ("stop the job", "stopped the job", True),  # a doubled consonant
    ("merge it", "merged it", True),  # a verb ending in e
    ("merge it", "completed", True),
    ("backfill x", "[x] backfill x", True),  # a checked box
    ("backfill x", "todo: [x] backfill x", True),  # whatever its label
    ("backfill invoice_lines", "backfill invoice_lines still open", False),
    ("merge it", "next: merge it, completed", False),  # still to do wins over done words
    ("backfill x", "backfill x", False),
    ("...", "x", False),  # a step with no verb
])
def test_a_pending_step_is_claimed_done_by_done_words_or_its_verbs_past_unless_still_pending(step, claim, done):
    assert claims_done(step, claim) is done
