"""Stated values by what they are (issue 46, round five): values found in any shape of tool output (a log line's
`key=value` pairs, a list of measurements, a config directive, a loose table, a tool's version) and compared with a
summary through their normalised form (a date in any format, a version's exact digits, a number rounded or as a
percentage, a duration as a clock), failures kept by their values, and a command that printed nothing kept by its
effect. Each test scores a history and a summary through `score_compaction` and asks what it says of one fact."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.facts import FactKind
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout
from tests.compaction_app.engine.retention.labelled_set_round5 import GROUPS, PARTS, sessions
from tests.compaction_app.engine.retention.test_round_four_rules import kept


def output(cmd: str, body: str, code: int = 0) -> list[dict]:
    return [fcall("c1", "exec_command", cmd=cmd), fout("c1", exec_out(code, body))]


CERT = output("openssl x509 -enddate -noout -in certs/api-7.pem", "notAfter=Mar 14 09:30:00 2027 GMT")


@pytest.mark.parametrize(("claim", "held"), [
    ("- certs/api-7.pem expires on 2027-03-14", True),
    ("- the api-7 certificate is valid until 14 March 2027", True),
    ("- api-7 cert: notAfter March 14, 2027", True),
    ("- certs/api-7.pem expires on 2027-04-14", False),
    ("- certs/api-7.pem expires on 2026-03-14", False),
    ("- checked certs/api-7.pem", False),
])
def test_a_date_is_kept_in_any_format_and_lost_on_another_day(claim, held):
    assert kept(CERT, claim, FactKind.VALUE, "Mar 14 09:30:00 2027") is held


@pytest.mark.parametrize(("history", "tag", "claim", "held"), [
    (output("go version", "go version go1.22.7 linux/amd64"), "go1.22.7", "- toolchain: Go 1.22.7", True),
    (output("go version", "go version go1.22.7 linux/amd64"), "go1.22.7", "- toolchain: Go 1.22", False),
    (output("go version", "go version go1.22.7 linux/amd64"), "go1.22.7", "- toolchain: go1.21.7", False),
    (output("psql --version", "psql (PostgreSQL) 16.3"), "16.3", "- psql is v16.3", True),
    (output("psql --version", "psql (PostgreSQL) 16.3"), "16.3", "- the client is PostgreSQL 16", False),
    (output("java -version", 'openjdk version "21.0.4" 2024-07-16'), "21.0.4", "- JDK 21.0.4", True),
    (output("java -version", 'openjdk version "21.0.4" 2024-07-16'), "21.0.4", "- JDK 21", False),
])
def test_a_version_is_found_in_the_tools_own_words_and_compared_digit_for_digit(history, tag, claim, held):
    assert kept(history, claim, FactKind.VALUE, tag) is held


TRAINING = output("tail -n 3 logs/train-4.log", "\n".join([
    "epoch 8/10 - loss 0.2214 - val_auc 0.9012", "epoch 9/10 - loss 0.2154 - val_auc 0.9105",
    "epoch 10/10 - loss 0.2094 - val_auc 0.9131"]))


@pytest.mark.parametrize(("claim", "held"), [
    ("- val_auc 0.9131 after epoch 10", True),
    ("- val_auc ended at 91.31%", True),
    ("- val_auc 0.913", True),
    ("- val_auc 0.9105", False),  # an earlier epoch's
    ("- val_auc 0.9", False),  # too coarse to state it
    ("- val_auc 0.9311", False),
])
def test_the_last_value_of_a_list_of_measurements_counts_as_a_fraction_or_a_percentage(claim, held):
    assert kept(TRAINING, claim, FactKind.VALUE, "val_auc") is held


LOGFMT = output("grep finished logs/ingest-9.log",
                "2026-12-02 03:17:44 INFO ingest finished rows=18,204,551 elapsed=1h12m09s")


@pytest.mark.parametrize(("tag", "claim", "held"), [
    ("elapsed", "- ingest-9 finished in 1:12:09", True),
    ("elapsed", "- ingest-9_run_time = about 72 min", True),
    ("elapsed", "- ingest-9 took about 12 min", False),
    ("rows", "- ingest-9 loaded 18.2M rows", True),
    ("rows", "- ingest-9 loaded 18,204,551 rows", True),
    ("rows", "- ingest-9 loaded 18.4M rows", False),
])
def test_a_log_lines_key_value_pairs_are_settings_in_any_number_format(tag, claim, held):
    assert kept(LOGFMT, claim, FactKind.VALUE, tag) is held


NGINX = output("grep -n client_max_body_size /etc/nginx/conf.d/ledger-3.conf", "14:    client_max_body_size 25m;")
DF = output("df -h /data/ingest-5", "Filesystem      Size  Used Avail Use% Mounted on\n"
                                    "/dev/nvme1n1    500G  457G   43G  92% /data/ingest-5")


@pytest.mark.parametrize(("history", "tag", "claim", "held"), [
    (NGINX, "client_max_body_size", "- uploads are capped at 25 MiB (client_max_body_size)", True),
    (NGINX, "client_max_body_size", "- client_max_body_size 25k", False),
    (DF, "Avail", "- /data/ingest-5 has 43 GiB available", True),
    (DF, "Avail", "- /data/ingest-5 has 43 MiB available", False),
    (DF, "Use%", "- /data/ingest-5 is 92% full", True),
    (DF, "Use%", "- /data/ingest-5 is 29% full", False),
])
def test_a_config_directive_and_a_table_with_a_plain_header_are_settings(history, tag, claim, held):
    assert kept(history, claim, FactKind.VALUE, tag) is held


MOVE = output("git mv src/ledger/legacy_3.go internal/ledger/book_3.go", "")


@pytest.mark.parametrize(("claim", "held"), [
    ("- moved src/ledger/legacy_3.go to internal/ledger/book_3.go", True),
    ("- the ledger code is now internal/ledger/book_3.go, renamed from src/ledger/legacy_3.go", True),
    ("- the ledger code is in src/ledger/legacy_3.go", False),
])
def test_a_command_that_printed_nothing_is_kept_by_its_effect(claim, held):
    assert kept(MOVE, claim, FactKind.COMMAND, "internal/ledger/book_3.go") is held


def test_a_check_that_printed_something_still_needs_its_exit_status():
    history = output("pytest tests/test_book_3.py -q", "1 passed in 0.02s")
    assert not kept(history, "- ran pytest tests/test_book_3.py -q", FactKind.COMMAND, "test_book_3")


MISSING = output("python -m pipeline.ingest --day 2026-11-20", "Traceback (most recent call last):\n  File "
                 "\"pipeline/ingest.py\", line 88, in load\nFileNotFoundError: [Errno 2] No such file or directory: "
                 "'data/raw/2026-11-20/batch_3.parquet'", code=1)
CAPTURE = output("kubectl logs deploy/ledger-3 | grep level=error", "ts=2026-12-01T10:11:07Z level=error "
                 "msg=\"capture failed\" order=ord_3x9 code=expired_card attempt=3")
RUST = output("cargo build -p ledger-core", "error[E0382]: borrow of moved value: `batch`\n  --> "
              "crates/ledger-core/src/book_3.rs:51:13\nerror: could not compile `ledger-core`", code=101)


@pytest.mark.parametrize(("history", "tag", "claim", "held"), [
    (MISSING, "batch_3.parquet", "- the ingest stops: data/raw/2026-11-20/batch_3.parquet does not exist", True),
    (MISSING, "batch_3.parquet", "- the ingest stops: data/raw/2026-11-21/batch_3.parquet does not exist", False),
    (MISSING, "batch_3.parquet", "- the ingest stops on a missing parquet file", False),
    (CAPTURE, "ord_3x9", "- capturing ord_3x9 failed with expired_card", True),
    (CAPTURE, "ord_3x9", "- capturing ord_3x9 failed with card_declined", False),
    (RUST, "E0382", "- cargo build fails with E0382 on batch", True),
    (RUST, "E0382", "- cargo build fails with E0499 on batch", False),
])
def test_a_failure_is_kept_by_its_values_not_its_class_or_timestamp(history, tag, claim, held):
    assert kept(history, claim, FactKind.ERROR, tag) is held


def test_the_segfault_of_a_command_needs_more_than_the_command_line():
    history = output("./bin/indexer-4 --rebuild", "bash: line 1: 5014 Segmentation fault      (core dumped) "
                     "./bin/indexer-4 --rebuild", code=139)
    assert not kept(history, "- tried ./bin/indexer-4 --rebuild; it stopped", FactKind.ERROR, "indexer-4")
    assert kept(history, "- ./bin/indexer-4 --rebuild segfaulted (core dumped)", FactKind.ERROR, "indexer-4")


@pytest.mark.parametrize("part", PARTS)
def test_round_five_plants_every_family_held_and_lost(part):
    from compaction_app.engine.retention.score import score_compaction
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3

    tallies = r3.evaluate(sessions(part), lambda before, after, carried: score_compaction([], []), lambda d: [])
    for name in (*GROUPS[part], *r3.ORDINALS.values()):
        assert tallies[name].lost >= 30 and tallies[name].held >= 30, (part, name)


DU = output("du -sh build/artifacts-4", "1.2G\tbuild/artifacts-4")
GIT_DATE = output("git log -1 --format=%cd -- services/reports-4", "Tue Nov 24 16:02:11 2026 +0100")
COUNT = output("psql -c 'select count(*) from ledger_4.entries'", " count\n-------\n 48213\n(1 row)")
SS = output("ss -ltnp", "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\nLISTEN 0      2048   "
                        "0.0.0.0:9024     0.0.0.0:*     users:((\"gunicorn\",pid=3024,fd=5))")


@pytest.mark.parametrize(("history", "tag", "claim", "held"), [
    (DU, "1.2G", "- build/artifacts-4 takes about 1229 MiB", True),
    (DU, "1.2G", "- build/artifacts-4 takes 1.2 MiB", False),
    (GIT_DATE, "Nov 24 16:02:11 2026", "- services/reports-4 last changed on 2026-11-24", True),
    (GIT_DATE, "Nov 24 16:02:11 2026", "- services/reports-4 last changed on 2026-11-23", False),
    (COUNT, "48213", "- ledger_4.entries has about 48.2k rows", True),
    (COUNT, "48213", "- ledger_4.entries has 48,312 rows", False),
    (SS, "0.0.0.0:9024", "- gunicorn is on port 9024", True),
    (SS, "0.0.0.0:9024", "- gunicorn is on port 9025", False),
])
def test_a_short_output_states_its_values_without_naming_them(history, tag, claim, held):
    assert kept(history, claim, FactKind.VALUE, tag) is held


TOML = output("sed -n 1,3p services/reports-4/config.toml",
              "[database]\nurl = \"postgresql://reports@db-4.internal:5432/ledger\"\npool = 10")
QUEUE = output("curl -s http://queue.internal/api/queues/invoices-4",
               '{"queue": "invoices-4", "stats": {"depth": 1204, "oldest_age_seconds": 1800}}')


@pytest.mark.parametrize(("history", "tag", "claim", "held"), [
    (TOML, "db-4.internal", "- the database is ledger on db-4.internal:5432 (user reports)", True),
    (TOML, "db-4.internal", "- the database is on db-4.internal:5532", False),
    (QUEUE, "oldest_age_seconds", "- the oldest message of invoices-4 is 30 minutes old", True),
    (QUEUE, "oldest_age_seconds", "- invoices-4: oldest_age_seconds = 1800.", True),
    (QUEUE, "oldest_age_seconds", "- the oldest message of invoices-4 is 30 seconds old", False),
])
def test_an_address_is_its_host_and_port_and_a_name_can_say_its_unit(history, tag, claim, held):
    assert kept(history, claim, FactKind.VALUE, tag) is held


def test_a_failure_named_by_its_code_between_its_first_and_last_lines_is_a_fact():
    history = output("./gradlew :reports-4:test", "NightlyReportTest > exportsLedger() FAILED\n    java.sql."
                     "SQLSyntaxErrorException: ORA-00942: table or view does not exist\n        at oracle.jdbc."
                     "driver.T4CTTIoer11.processError(T4CTTIoer11.java:630)\n\nFAILURE: Build failed with an "
                     "exception.", code=1)
    assert kept(history, "- the reports-4 test fails on ORA-00942", FactKind.ERROR, "ORA-00942")
    assert not kept(history, "- the reports-4 test fails on a database error", FactKind.ERROR, "ORA-00942")


@pytest.mark.parametrize(("said", "tag", "claim", "held"), [
    ("Speed up export 4. Export 4 must stay under 2 GB of memory.", "export 4 must",
     "- export 4 must stay below 2000 MB of memory", True),
    ("Speed up export 4. Export 4 must stay under 2 GB of memory.", "export 4 must",
     "- export 4 must stay under 2 MB of memory", False),
    ("Then tenant 4. Tenant 4 must be migrated by Jul 15, 2027.", "tenant 4 must",
     "- tenant 4 must be migrated by 2027-07-15", True),
    ("Then tenant 4. Tenant 4 must be migrated by Jul 15, 2027.", "tenant 4 must",
     "- tenant 4 must be migrated by 2027-07-16", False),
])
def test_a_users_dates_and_quantities_are_compared_by_what_they_are(said, tag, claim, held):
    from compaction_app.engine.items import user_message

    assert kept([user_message(said)], claim, FactKind.CONSTRAINT, tag) is held


EVENT = output("kubectl get events -n refunds --field-selector reason=BackOff",
               "LAST SEEN   TYPE      REASON    OBJECT              MESSAGE\n2m          Warning   BackOff   "
               "pod/worker-4-x9z    Back-off restarting failed container worker in pod worker-4-x9z_refunds")
CACHES = output("python -c 'from django.conf import settings; print(settings.CACHES)'",
                "{'BACKEND': 'django_redis.cache.RedisCache', 'LOCATION': 'redis://cache-4:6379/2', 'TIMEOUT': 300}")


@pytest.mark.parametrize(("history", "kind", "tag", "claim", "held"), [
    (EVENT, FactKind.ERROR, "worker-4-x9z", "- pod worker-4-x9z is in BackOff, its container keeps restarting", True),
    (EVENT, FactKind.ERROR, "worker-4-x9z", "- pod worker-5-x9z is in BackOff", False),
    (CACHES, FactKind.VALUE, "cache-4:6379/2", "- the default cache is Redis on cache-4:6379, database 2", True),
    (CACHES, FactKind.VALUE, "cache-4:6379/2", "- the default cache is redis://cache-4:6379/5", False),
])
def test_a_resource_is_its_name_and_an_address_keeps_the_ids_of_its_path(history, kind, tag, claim, held):
    assert kept(history, claim, kind, tag) is held
