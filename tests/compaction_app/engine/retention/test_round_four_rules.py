"""The structural check's rules of round four (issue 46): facts a coding session has that round three could not see
or could not match, and claims that keep a fact's words while saying the opposite. Each test scores a history and a
summary through `score_compaction` and asks what it says of one fact."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind
from compaction_app.engine.retention.score import score_compaction
from tests.compaction_app.engine.retention.labelled_set import (
    AGENTS,
    assistant,
    exec_out,
    fcall,
    fout,
    shell_out,
)


def kept(history: list[dict], claim: str, kind: FactKind, tag: str) -> bool:
    """The verdict on the one fact of `kind` whose text holds `tag`, for a window that is the summary `claim`."""
    result = score_compaction([AGENTS, *history], [AGENTS, user_message(f"{SUMMARY_PREFIX}\n{claim}")])
    verdicts = [v for v in result.verdicts if v.fact.kind is kind and tag.lower() in v.fact.text.lower()]
    assert verdicts, f"no {kind} fact holds {tag!r}: {[v.fact.text for v in result.verdicts]}"
    return all(v.kept for v in verdicts)


PYTEST = [fcall("c1", "exec_command", cmd="pytest tests/billing/test_totals.py -q"),
          fout("c1", exec_out(1, "F.\n    def test_rounds():\nE       AssertionError: assert Decimal('10.01') == "
                                 "Decimal('10.00')\nsrc/billing/totals.py:212: AssertionError\nFAILED "
                                 "tests/billing/test_totals.py::test_rounds - AssertionError\n"
                                 "1 failed, 14 passed in 0.31s"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- test_rounds fails: AssertionError at src/billing/totals.py:212", True),
    ("- line 212 of src/billing/totals.py rounds 10.005 up", True),
    ("- test_rounds fails: AssertionError at src/billing/totals.py:222", False),
    ("- test_rounds fails somewhere in src/billing/totals.py", False),
])
def test_the_place_a_failure_was_raised_is_a_fact_kept_by_its_file_and_line(claim, held):
    assert kept(PYTEST, claim, FactKind.ERROR, "totals.py:212") is held


@pytest.mark.parametrize(("claim", "held"), [
    ("- tests/billing: 14 passed, 1 failed", True),
    ("- 1 of the 15 tests fails, the rest pass", True),
    ("- 1 failed, 14 passed", True),
    ("- 2 failed, 13 passed", False),
    ("- some tests fail", False),
])
def test_test_counts_are_kept_in_any_order_or_as_a_share_of_the_total(claim, held):
    assert kept(PYTEST, claim, FactKind.ERROR, "1 failed, 14 passed") is held


LOG = [fcall("g", "shell", command=["bash", "-lc", "git log --oneline -3"]),
       fout("g", shell_out(0, "4b1c9e2f7 merge fix/pdf\n9a03d5c1e totals: switch to ROUND_HALF_UP\n"
                              "77e0a1b3c add pdf export")),
       assistant("9a03d5c1e switched the rounding mode; I'll revert it.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- regression: 9a03d5c1e, to revert", True),
    ("- regression: commit 9a03d5c (git short hash), to revert", True),
    ("- regression: 77e0a1b3c, to revert", False),
    ("- regression: 9a03d5, to revert", False),  # six characters name no commit
])
def test_a_commit_hash_is_kept_by_a_prefix_of_seven_characters_or_more(claim, held):
    assert kept(LOG, claim, FactKind.VALUE, "9a03d5c1e") is held


TIME = [fcall("t", "shell", command=["bash", "-lc", "time ./manage.py migrate --check --database shard_7"]),
        fout("t", shell_out(0, "No migrations to apply.\n\nreal\t2m14.310s\nuser\t0m3.120s\nsys\t0m0.410s"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- migrate --check on shard_7 took 2 min 14 s", True),
    ("- migrate --check on shard_7: about 134 s", True),
    ("- migrate --check on shard_7: 2.2 min", True),
    ("- migrate --check on shard_7: 14 s", False),
    ("- migrate --check on shard_7: 2 min 41 s", False),
])
def test_a_duration_in_several_units_is_one_quantity_stated_in_any_unit_that_agrees(claim, held):
    assert kept(TIME, claim, FactKind.VALUE, "2m14.310s") is held


LOAD = [fcall("l", "exec_command", cmd="./scripts/loadtest --profile checkout-7 --summary"),
        fout("l", exec_out(0, "requests: 12000\nerror_rate: 2.37%\nduration: 600 s")),
        fcall("p", "exec_command", cmd="./scripts/latency --route /export/7"),
        fout("p", exec_out(0, "samples: 5000\np95_latency: 421 ms"))]


@pytest.mark.parametrize(("claim", "tag", "held"), [
    ("- checkout-7 load test: error rate ~2%", "error_rate", True),
    ("- checkout-7 load test: error rate 23.7%", "error_rate", False),
    ("- /export/7 answers in 421 ms at the 95th percentile", "p95_latency", True),  # named by what was measured
    ("- /export/7 answers in 421 s at the 95th percentile", "p95_latency", False),
])
def test_percentages_are_quantities_and_a_value_is_named_by_what_it_measured(claim, tag, held):
    assert kept(LOAD, claim, FactKind.VALUE, tag) is held


def test_a_setting_whose_value_is_one_digit_is_still_a_fact():
    env = [fcall("e", "exec_command", cmd="env | grep ^WEB_"), fout("e", exec_out(0, "WEB_CONCURRENCY=4"))]
    assert kept(env, "- env: WEB_CONCURRENCY=4", FactKind.VALUE, "WEB_CONCURRENCY") is True
    assert kept(env, "- env: WEB_CONCURRENCY=7", FactKind.VALUE, "WEB_CONCURRENCY") is False


PIP = [fcall("i", "shell", command=["bash", "-lc", "pip install -e ."]),
       fout("i", shell_out(0, "ERROR: pip's dependency resolver does not currently take into account all the "
                              "packages that are installed.\ndjango-storages 1.14.2 requires boto3<5.0,>=3.7, but "
                              "you have boto3 5.3 which is incompatible.\nSuccessfully installed app-0.1"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- django-storages 1.14.2 needs boto3 >=3.7,<5.0; boto3 5.3 is installed", True),
    ("- django-storages needs boto3 below 5.3", False),
])
def test_a_resolver_conflict_is_a_failure_kept_by_its_versions_in_any_order(claim, held):
    assert kept(PIP, claim, FactKind.ERROR, "boto3<5.0,>=3.7") is held


ENDPOINT = [fcall("r", "exec_command", cmd="tail -n 2 logs/runserver.log"),
            fout("r", exec_out(0, "Not Found: /api/v2/invoices/7/pdf\n\"GET /api/v2/invoices/7/pdf HTTP/1.1\" 404"))]


def test_an_http_status_code_says_its_reason_phrase():
    assert kept(ENDPOINT, "- GET /api/v2/invoices/7/pdf -> 404", FactKind.ERROR, "/api/v2/invoices/7/pdf") is True
    assert kept(ENDPOINT, "- GET /api/v2/invoices/7/pdf -> 200", FactKind.ERROR, "/api/v2/invoices/7/pdf") is False


COMMAND = [fcall("x", "exec_command", cmd="pytest -x --reuse-db --maxfail=2 tests/export"),
           fout("x", exec_out(0, "31 passed in 2.4s"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("`pytest -x --reuse-db --maxfail=2 tests/export` passed.", True),
    ("`pytest -x --create-db --maxfail=2 tests/export` passed.", False),  # a long option names what it did
    ("`pytest -x --reuse-db --maxfail=2 tests/export` failed. The lint passed.", False),  # status in its sentence
])
def test_a_command_is_kept_with_its_long_options_and_its_status_in_one_sentence(claim, held):
    assert kept(COMMAND, claim, FactKind.COMMAND, "tests/export") is held


DECISION = [user_message("We'll go with Redis streams instead of Celery for the export queue (PAY-7).")]


@pytest.mark.parametrize(("claim", "held"), [
    ("For the export queue the user chose Redis streams over Celery (PAY-7).", True),
    ("| decision PAY-7 | Redis streams for the export queue, not Celery |", True),
    ("For the export queue the user chose Celery over Redis streams (PAY-7).", False),
    ("| decision PAY-7 | Celery for the export queue, not Redis streams |", False),
])
def test_a_choice_turned_round_is_not_kept(claim, held):
    assert kept(DECISION, claim, FactKind.GOAL, "PAY-7") is held


CONSTRAINTS = [user_message("Next, the exporter. Don't run migrations against prod-7; use staging-7 until the "
                            "freeze ends."),
               user_message("Then tidy up. Keep the field names of InvoiceSerializer7 as they are; mobile app 7 "
                            "reads them.")]


@pytest.mark.parametrize(("claim", "tag", "held"), [
    ("The user asked: no migrations on prod-7; staging-7 only until the freeze is over.", "prod-7", True),
    ("The user said migrations against prod-7 can run now; staging-7 is frozen until the freeze ends.", "prod-7",
     False),  # judged on the sentence about prod-7: the next clause's "frozen" is about staging
    ("InvoiceSerializer7 field names are frozen (mobile app 7 reads them).", "InvoiceSerializer7", True),
    ("Renaming InvoiceSerializer7 fields is fine; mobile app 7 reads them.", "InvoiceSerializer7", False),
])
def test_a_prohibition_is_only_kept_by_a_claim_that_still_forbids(claim, tag, held):
    assert kept(CONSTRAINTS, claim, FactKind.CONSTRAINT, tag) is held


TODO = [assistant("The export runs for small tenants.\nTODO: backfill invoice_lines for tenant t7")]


@pytest.mark.parametrize(("claim", "held"), [
    ("### Open items\n* Still open: tenant t7 still needs its invoice_lines backfill.", True),
    ("### Open items\n* Already done: backfilled invoice_lines for tenant t7.", False),  # a heading is no claim
    ("Backfilled invoice_lines for tenant t7. Still open: the CHANGELOG.", False),
    ("Done: the invoice_lines backfill for tenant t7.", False),
])
def test_a_step_still_to_do_is_not_kept_by_a_claim_that_it_is_done(claim, held):
    assert kept(TODO, claim, FactKind.NEXT_STEP, "tenant t7") is held
