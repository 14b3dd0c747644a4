"""The structural check's rules of round four (issue 46): facts a coding session has that round three could not see
or could not match, and claims that keep a fact's words while saying the opposite. Each test scores a history and a
summary through `score_compaction` and asks what it says of one fact."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind, call_text, source_of
from compaction_app.engine.retention.score import score_compaction
from compaction_app.engine.retention.statements import normalise_key, restated
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


# Rules added after blind_5's first run (labelled_set_round4.BLIND_5).

TSC = [fcall("ts", "exec_command", cmd="npx tsc --noEmit"),
       fout("ts", exec_out(2, "src/app/cart.ts(41,7): error TS2345: Argument of type 'string' is not assignable to "
                              "parameter of type 'number'."))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- tsc: TS2345 at src/app/cart.ts line 41 (a string where a number is expected)", True),
    ("- tsc: TS2345 at src/app/cart.ts line 44", False),
    ("- tsc: a type error in src/app/cart.ts", False),
])
def test_a_compiler_error_with_its_place_is_kept_by_the_place_and_its_code(claim, held):
    assert kept(TSC, claim, FactKind.ERROR, "cart.ts(41,7)") is held


def test_test_counts_as_a_fraction_of_the_total():
    jest = [fcall("j", "exec_command", cmd="pnpm jest"),
            fout("j", exec_out(1, "Tests:       2 failed, 40 passed, 42 total"))]
    assert kept(jest, "- jest: 40/42 passing, 2 failing", FactKind.ERROR, "2 failed, 40 passed") is True
    assert kept(jest, "- jest: 39/42 passing, 3 failing", FactKind.ERROR, "2 failed, 40 passed") is False


def test_an_image_digest_the_agent_pinned_is_a_fact_and_a_tag_does_not_keep_it():
    digest = "4f" * 32
    push = [fcall("d", "exec_command", cmd="docker push registry.local/web:7"),
            fout("d", exec_out(0, f"7: digest: sha256:{digest} size: 1573")),
            assistant(f"Pinned the deploy to registry.local/web@sha256:{digest}.")]
    assert kept(push, f"- deploy: registry.local/web@sha256:{digest}", FactKind.VALUE, digest) is True
    assert kept(push, "- deploy: registry.local/web:7", FactKind.VALUE, digest) is False


def test_a_number_with_thousands_separators_states_the_number():
    sql = [fcall("q", "exec_command", cmd="psql -c 'UPDATE invoices SET currency=1'"),
           fout("q", exec_out(0, "UPDATE 2407")), assistant("Moved 2407 invoices to EUR.")]
    assert kept(sql, "- 2,407 invoices moved to EUR", FactKind.VALUE, "2407") is True
    assert kept(sql, "- 2,470 invoices moved to EUR", FactKind.VALUE, "2407") is False


def test_a_short_tables_cells_are_settings_and_kubernetes_sizes_are_bytes():
    top = [fcall("k", "exec_command", cmd="kubectl top pod -l app=api-7"),
           fout("k", exec_out(0, "NAME              CPU(cores)   MEMORY(bytes)\napi-7-7f9c5-x2x   250m         1432Mi"))]
    assert kept(top, "- api-7 uses 1.40 GiB of memory", FactKind.VALUE, "1432Mi") is True
    assert kept(top, "- api-7 uses 1432 KiB of memory", FactKind.VALUE, "1432Mi") is False


def test_a_dependency_range_is_named_by_its_package_and_a_caret_is_not_a_tilde():
    pkg = [fcall("p", "exec_command", cmd="jq .dependencies web-7/package.json"),
           fout("p", exec_out(0, '{\n  "date-fns": "~4.21.3"\n}'))]
    assert kept(pkg, "web-7 depends on date-fns ~4.21.3.", FactKind.VALUE, "date-fns = ~4.21.3") is True
    assert kept(pkg, "web-7 depends on date-fns ^4.21.3.", FactKind.VALUE, "date-fns = ~4.21.3") is False


RULES = [user_message("Start with the cart. Use pnpm only; npm install rewrites the lockfile of web-7."),
         user_message("Last, the reports. The reports-7 job must finish before 06:00 UTC.")]


@pytest.mark.parametrize(("claim", "tag", "held"), [
    ("User: pnpm, never npm, in web-7 (npm rewrites the lockfile).", "web-7", True),
    ("User: npm install is fine in web-7; the lockfile may be rewritten.", "web-7", False),
    ("User: reports-7 has to be done by 06:00 UTC.", "reports-7", True),
    ("User: reports-7 may run past 06:00 UTC.", "reports-7", False),
])
def test_a_restriction_by_only_or_must_is_only_kept_by_a_claim_that_still_restricts(claim, tag, held):
    assert kept(RULES, claim, FactKind.CONSTRAINT, tag) is held


def test_a_checked_box_says_done_whatever_its_label():
    plan = [assistant("Plan:\n- [x] reproduce\n- [ ] add an index on orders_7.created_at")]
    assert kept(plan, "  - todo: [ ] index on orders_7.created_at", FactKind.NEXT_STEP, "orders_7") is True
    assert kept(plan, "  - todo: [x] index on orders_7.created_at added", FactKind.NEXT_STEP, "orders_7") is False


def test_a_setting_is_named_by_its_hyphenated_name_or_by_its_sources_folder():
    pkg = [fcall("p", "exec_command", cmd="jq .dependencies web-7/package.json"),
           fout("p", exec_out(0, '{\n  "date-fns": "~4.21.3"\n}'))]
    assert kept(pkg, "- date-fns stays at ~4.21.3", FactKind.VALUE, "date-fns = ~4.21.3") is True
    assert kept(pkg, "- web-7: ~4.21.3", FactKind.VALUE, "date-fns = ~4.21.3") is True
    assert kept(pkg, "- web-8: ~4.21.3", FactKind.VALUE, "date-fns = ~4.21.3") is False


def test_a_quantity_with_thousands_separators_is_its_whole_number_not_a_decimal():
    bench = [fcall("b", "exec_command", cmd="wrk -d 30s http://127.0.0.1:8080/api/search"),
             fout("b", exec_out(0, "Latency p99: 1843ms")), assistant("Search answers in 1843 ms at p99.")]
    assert kept(bench, "- search p99 latency: 1,843 ms", FactKind.VALUE, "1843") is True
    assert kept(bench, "- search p99 latency: 1,834 ms", FactKind.VALUE, "1843") is False


def test_a_two_letter_word_inside_a_compound_name_names_its_setting():
    env = [fcall("e", "exec_command", cmd="cat conf/app.env"), fout("e", exec_out(0, "DB_PORT=6543\nQUEUE_PORT=6544\n"))]
    assert kept(env, "- orders_db: 6543", FactKind.VALUE, "DB_PORT") is True
    assert kept(env, "- orders_mq: 6543", FactKind.VALUE, "DB_PORT") is False


def test_a_known_setting_named_after_punctuation_further_on_in_the_text_is_still_read():
    # The run of words before the name is cut at the comma; the name after it is still looked for.
    (statement,) = restated("After the restart, RATE_LIMIT_PER_MIN is 600.", {normalise_key("RATE_LIMIT_PER_MIN")})
    assert (statement.key, statement.value) == ("RATE_LIMIT_PER_MIN", "600")


def test_a_local_shell_call_says_its_tool_and_its_command_as_the_other_calls_do():
    call = {"type": "local_shell_call", "call_id": "c", "status": "completed",
            "action": {"type": "exec", "command": ["bash", "-lc", "sed -n 1,80p src/pay/ledger.py"]}}
    assert call_text(call) == "local_shell sed -n 1,80p src/pay/ledger.py"


def test_the_settings_a_tool_that_is_no_shell_and_reads_no_file_printed_live_in_that_tool():
    # Two tools printing the same setting are two settings: the source is the tool's name, not "a tool".
    assert source_of({"type": "function_call", "name": "get_pool_config", "arguments": "{}"}) == "get_pool_config"
    assert source_of({"type": "function_call", "arguments": "{}"}) == "a tool"
