"""The structural check's rules of round eight (issue 46): the known bugs left by round seven, each planted in a
history and a summary, and the general readers round eight adds. Each test scores through `score_compaction` (or
reads through the public reader it names) and asks what it says of one fact."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.retention.facts import FactKind
from compaction_app.engine.retention.quantities import quantities
from compaction_app.engine.retention.score import score_compaction
from compaction_app.engine.retention.statements import normalise_key, restated
from tests.compaction_app.engine.retention.labelled_set import AGENTS, exec_out, fcall, fout
from tests.compaction_app.engine.retention.test_round_four_rules import kept


def test_each_setting_of_a_sentence_takes_the_value_after_its_own_to():
    names = {normalise_key("RATE_LIMIT_PER_MIN"), normalise_key("QUEUE_SIZE")}
    found = restated("Set RATE_LIMIT_PER_MIN to 600 and QUEUE_SIZE to 250.", names)
    assert [(s.key, s.value) for s in found] == [("RATE_LIMIT_PER_MIN", "600"), ("QUEUE_SIZE", "250")]


ENV = [fcall("c1", "exec_command", cmd="cat deploy/limits.env"),
       fout("c1", exec_out(0, "RATE_LIMIT_PER_MIN=300\nQUEUE_SIZE=100")),
       user_message("Set RATE_LIMIT_PER_MIN to 600 and QUEUE_SIZE to 250.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- deploy/limits.env: RATE_LIMIT_PER_MIN is 600 now", True),
    ("- deploy/limits.env: RATE_LIMIT_PER_MIN is 250 now", False),
])
def test_a_correction_of_two_settings_in_one_sentence_sets_the_first_to_its_own_value(claim, held):
    assert kept(ENV, claim, FactKind.VALUE, "RATE_LIMIT_PER_MIN") is held


@pytest.mark.parametrize(("text", "seconds"), [
    ("tarda 90 segundos", 90), ("espera 2 minutos", 120), ("cada 3 horas", 10800), ("1500 milisegundos", 1.5),
    ("attend 45 secondes", 45), ("nach 12 Sekunden", 12), ("alle 5 Minuten", 300),
])
def test_time_units_in_other_languages_are_read(text, seconds):
    (quantity,) = quantities(text)
    assert quantity.base == pytest.approx(seconds)


TIMEOUT = [fcall("c1", "exec_command", cmd="cat conf/worker.toml"), fout("c1", exec_out(0, "worker_timeout_ms = 90000"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- En conf/worker.toml, worker_timeout_ms vale 90 segundos.", True),
    ("- En conf/worker.toml, worker_timeout_ms vale 90 minutos.", False),
])
def test_a_spanish_unit_keeps_a_converted_setting_and_loses_a_wrong_one(claim, held):
    assert kept(TIMEOUT, claim, FactKind.VALUE, "worker_timeout_ms") is held


DIFF = [fcall("c1", "exec_command", cmd="git diff --stat origin/main...reindex-10"),
        fout("c1", exec_out(0, " internal/merge/merge.go      | 39 +++++++++++++------\n"
                               " cmd/indexer/main.go          |  3 +-\n"
                               " 2 files changed, 55 insertions(+), 21 deletions(-)"))]


def test_a_carried_diff_stat_is_kept_while_its_output_is_back_in_the_window():
    from compaction_app.engine.retention.score import carried_facts

    first = score_compaction([AGENTS, *DIFF], [AGENTS, user_message(f"{SUMMARY_PREFIX}\nreindex-10: +55/-21.")])
    carried = carried_facts(first.to_dict())
    # The agent runs the same diff again and the next window keeps its output as it was.
    again = [AGENTS, user_message(f"{SUMMARY_PREFIX}\nreindex-10: +55/-21."), *DIFF]
    for _ in range(2):
        result = score_compaction([*again, user_message("go on")], again, carried=carried)
        verdicts = [v for v in result.verdicts if "55 insertions" in v.fact.text]
        assert verdicts and all(v.kept for v in verdicts)
        carried = carried_facts(result.to_dict())


PODS = [fcall("c2", "exec_command", cmd="kubectl get pods -l app=indexer-31 -n search"),
        fout("c2", exec_out(0, "NAME                        READY   STATUS    RESTARTS       AGE\n"
                               "indexer-31-5f7c9d-x2x4q    1/1     Running   3 (4m ago)     2d3h\n"
                               "indexer-31-5f7c9d-p9kw2    1/1     Running   0              2d3h"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- indexer-31-5f7c9d-x2x4q: 3 restarts", True),
    ("- El pod indexer-31-5f7c9d-x2x4q lleva 3 reinicios y sigue Running.", True),
    ("- indexer-31-5f7c9d-x2x4q: 8 restarts", False),
    ("- indexer-31-5f7c9d-x2x4q: 0 restarts", False),
])
def test_a_row_is_kept_by_what_tells_it_from_the_other_rows(claim, held):
    # READY 1/1 and AGE 2d3h are the same in every row: they are no fact of the row, nor is "4m" of "(4m ago)".
    assert kept(PODS, claim, FactKind.VALUE, "indexer-31-5f7c9d-x2x4q") is held


def test_another_commands_output_in_the_window_does_not_state_a_rows_value():
    # The diff's output names cmd/indexer and says "3 files": neither names the pod nor states its restarts.
    diff = [fcall("c3", "exec_command", cmd="git diff --stat origin/main...reindex-31"),
            fout("c3", exec_out(0, " cmd/indexer/main.go | 3 +-\n 3 files changed, 55 insertions(+), 21 deletions(-)"))]
    summary = user_message(f"{SUMMARY_PREFIX}\nreindex-31 diff: see the output above.")
    result = score_compaction([AGENTS, *PODS, *diff], [AGENTS, *diff, summary])
    (verdict,) = [v for v in result.verdicts if "x2x4q RESTARTS" in v.fact.text]
    assert not verdict.kept


CPU = [user_message("ok so for the reindex of tenant 12: keep it under 30% CPU on the primary pls, ops pages us "
                    "above that")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- El reindex del tenant 12 debe quedarse por debajo del 30% de CPU en el primario.", True),
    ("- Límite del reindex del tenant 12: como máximo 30% de CPU en el primario.", True),
    ("- Le reindex du tenant 12 doit rester sous 30% de CPU sur le primaire.", True),
    ("- El reindex del tenant 12 debe quedarse por debajo del 50% de CPU en el primario.", False),
    ("- El reindex del tenant 12 usa 30% de CPU en el primario.", False),
])
def test_a_one_sentence_limit_is_a_constraint_kept_with_its_bound_in_any_language(claim, held):
    assert kept(CPU, claim, FactKind.CONSTRAINT, "keep it under 30%") is held


RATE = [user_message("One more thing for checkout 50: it must sustain 370 requests per second at the peak.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- checkout 50 has to hold 370 req/s at peak.", True),
    ("- checkout 50 must sustain 22,200 requests per minute at the peak.", True),
    ("- checkout 50 load: >= 370 req/s", True),
    ("- checkout 50 must sustain 370 requests per minute at the peak.", False),
    ("- checkout 50 must sustain 3700 requests per second at the peak.", False),
])
def test_a_rate_is_compared_per_second_in_any_time_unit(claim, held):
    assert kept(RATE, claim, FactKind.CONSTRAINT, "checkout 50: it must") is held


@pytest.mark.parametrize(("summary", "held"), [
    ('{"topic": "checkout 50 load", "value": ">= 370 req/s"}', True),
    ("state:\n  - topic: checkout 50 load\n    value: \">= 370 req/s\"", True),
    ("| # | topic | what we know |\n|---|---|---|\n| 1 | checkout 50 load | >= 370 req/s |", True),
    ('{"topic": "checkout 50 load", "value": "370 req/min"}', False),
    ("state:\n  - topic: checkout 50 load\n    value: \"any load\"", False),
])
def test_a_json_yaml_or_table_summary_is_read_as_subject_and_value(summary, held):
    assert kept(RATE, summary, FactKind.CONSTRAINT, "checkout 50: it must") is held


GIT_STATUS = [fcall("c1", "exec_command", cmd="git status -sb"),
              fout("c1", exec_out(0, "## feature/refund-11...origin/feature/refund-11 [ahead 7, behind 9]\n"
                                     " M src/refund.ts"))]


@pytest.mark.parametrize(("claim", "held"), [
    ('{"topic": "feature/refund-11", "value": "7 ahead / 9 behind origin"}', True),
    ("- feature/refund-11 is 7 commits ahead of origin and 9 behind.", True),
    ('{"topic": "feature/refund-11", "value": "9 ahead / 7 behind origin"}', False),
    ("- feature/refund-11 is 9 commits ahead of origin and 7 behind.", False),
])
def test_numbers_given_each_others_labels_are_another_value(claim, held):
    assert kept(GIT_STATUS, claim, FactKind.VALUE, "refund-11 [ahead") is held


@pytest.mark.parametrize("claim", [
    "El deploy debe esperar al lunes", "Le déploiement doit attendre lundi", "Das Deployment muss bis Montag warten",
    "Nur am Montag deployen", "Solo se despliega el lunes", "Il deploy deve aspettare lunedì",
])
def test_an_obligation_is_read_in_the_summary_languages(claim):
    from compaction_app.engine.retention.contradictions import prohibits

    assert prohibits(claim) and not prohibits("El deploy espera al lunes")


PANIC = [fcall("c1", "exec_command", cmd="go run ./cmd/indexer --tenant 20"),
         fout("c1", exec_out(1, "panic: runtime error: index out of range [5] with length 5\n\ngoroutine 17 [running]:\n"
                                "example.com/search/internal/merge.(*Merger).flush(0xc000112000, 0x5)\n"
                                "\t/src/internal/merge/merge.go:220 +0x1a4\n"
                                "example.com/search/internal/merge.(*Merger).Run(...)\n"
                                "\t/src/internal/merge/merge.go:97 +0x2b\nexit status 2"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- indexer tenant 20: panic index out of range [5] at merge.go:220", True),
    ("- La línea 220 de merge.go provoca el panic.", True),
    ("- indexer tenant 20: panic at merge.go:97", False),
    ("- indexer tenant 20: panic at merge.go:221", False),
])
def test_a_place_is_kept_by_its_files_name_and_line_without_the_folders_or_the_frames_offset(claim, held):
    assert kept(PANIC, claim, FactKind.ERROR, "raised at /src/internal/merge/merge.go:220") is held


SET_ENV = [fcall("c1", "exec_command", cmd="kubectl exec deploy/indexer-20 -- env | grep ^INDEX_"),
           fout("c1", exec_out(0, "INDEX_BATCH=500\nINDEX_REFRESH_MS=1000")),
           fcall("c2", "exec_command", cmd="kubectl set env deploy/indexer-20 INDEX_REFRESH_MS=2500"),
           fout("c2", exec_out(0, "deployment.apps/indexer-20 env updated"))]


@pytest.mark.parametrize(("claim", "held"), [
    ('{"topic": "indexer-20 INDEX_REFRESH_MS", "value": "2.5 s (was 1000 ms)"}', True),
    ("- indexer-20 runs with INDEX_REFRESH_MS=2500", True),
    ('{"topic": "indexer-20 INDEX_REFRESH_MS", "value": "2500 s"}', False),
    ("- indexer-20 runs with INDEX_REFRESH_MS=1000", False),
])
def test_a_corrected_value_takes_the_unit_its_name_says(claim, held):
    assert kept(SET_ENV, claim, FactKind.VALUE, "INDEX_REFRESH_MS") is held


CACHES = [fcall("c1", "exec_command", cmd="python -c \"from django.conf import settings; "
                                          "print(settings.CACHES['default'])\""),
          fout("c1", exec_out(0, "{'BACKEND': 'django_redis.cache.RedisCache', 'LOCATION': "
                                 "'redis://cache-10:6379/1', 'TIMEOUT': 300}"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("Django's default cache is redis://cache-10:6379/1.", True),
    ("1. default cache\n   - redis://cache-10:6379/1", True),
    ("Django's default cache is redis://cache-10:6379/5.", False),
])
def test_a_printed_python_dict_is_read_by_its_keys_and_a_full_stop_ends_an_address(claim, held):
    assert kept(CACHES, claim, FactKind.VALUE, "LOCATION = redis://cache-10:6379/1") is held


DEADLINE = [user_message("Tenant 20 must be migrated by Sep 12, 2027.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("1. tenant 20 deadline\n   - 12 September 2027", True),
    ("- tenant 20 deadline: 12 September 2027", True),
    ("1. tenant 20 deadline\n   - 12 October 2027", False),
    ("1. tenant 20\n   - migrated some day around 12 September 2027", False),
])
def test_an_outline_heading_and_its_bullet_are_one_claim_and_a_deadline_says_must(claim, held):
    assert kept(DEADLINE, claim, FactKind.CONSTRAINT, "Tenant 20 must") is held


MEMORY = [user_message("Export 50 must stay under 4 GB of memory.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("1. export 50 memory\n   - 4 GB at most\n2. refunds-50 Makefile\n   - PARALLEL is set", True),
    ("1. export 50 memory\n   - 4 GB\n2. refunds-50 Makefile\n   - PARALLEL is set", False),
    ("1. export 50 memory\n   - 40 GB at most\n2. refunds-50 Makefile\n   - PARALLEL is set", False),
])
def test_an_outline_bullet_keeps_the_bound_its_heading_names(claim, held):
    assert kept(MEMORY, claim, FactKind.CONSTRAINT, "Export 50 must") is held


CSV = [fcall("c1", "exec_command", cmd="tail -n 2 reports/refunds_10.csv"),
       fout("c1", exec_out(0, "2026-11-30,412,8819.25\n2026-12-01,388,9130.25"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- On 2026-12-01 report 10 shows 388 refunds worth €9,130.25.", True),
    ("- refunds_10.csv: 9130.25 EUR refunded on 2026-12-01.", True),
    ("- On 2026-12-01 report 10 shows refunds worth €9,220.25.", False),
    ("- refunds_10.csv: 8819.25 EUR refunded on 2026-12-01.", False),
])
def test_comma_separated_rows_are_read_cell_by_cell(claim, held):
    assert kept(CSV, claim, FactKind.VALUE, "9130.25") is held


def test_a_log_lines_thousands_separators_are_no_comma_separated_cells():
    log = [fcall("c1", "exec_command", cmd="grep finished logs/ingest-11.log"),
           fout("c1", exec_out(0, "2026-12-02 03:17:44 INFO ingest finished rows=1,234,567 elapsed=1h12m09s"))]
    assert kept(log, "- ingest-11 finished in 1:12:09", FactKind.VALUE, "1h12m09s")


BUDGET = [user_message("The cloud bill for billing 50 has to stay below EUR 1,700 a month.")]


@pytest.mark.parametrize(("claim", "held"), [
    ("- billing 50 budget: < €1,700/month", True),
    ("- billing 50 budget: < €1,900/month", False),
    ("- billing 50 budget: €1,700/month", False),
])
def test_a_number_per_unit_in_one_token_is_the_number_and_the_unit(claim, held):
    assert kept(BUDGET, claim, FactKind.CONSTRAINT, "billing 50 has") is held
