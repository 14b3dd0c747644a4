"""statements.py: the settings a tool's output names and which value of each is the latest (issue 43: each reader's
rule with its boundaries, so that a planted bug in a reader dies here, in pure Python)."""

from __future__ import annotations

import json

import pytest

from compaction_app.engine.retention.statements import (
    Statement,
    corrected_sources,
    identifiers,
    is_table,
    latest_values,
    named_values,
    normalise_key,
    restated,
    row_values,
    structured,
    version_statement,
)


def read(*lines: str) -> list[tuple[str, str]]:
    return [(s.key, s.value) for s in structured(list(lines))]


def cells(*lines: str) -> list[tuple[str, str, tuple[str, ...], str]]:
    return [(s.key, s.value, s.row, s.row_name) for s in structured(list(lines))]


@pytest.mark.parametrize(("key", "name"), [
    ("HostPort", "host_port"), ("host-port", "host_port"), ("host port", "host_port"),
    ("RATE_LIMIT_PER_MIN", "rate_limit_per_min"), ("rate-limit-per-min", "rate_limit_per_min"),
    (" peak  memory ", "peak_memory"), ("oldestAgeSeconds", "oldest_age_seconds"),
])
def test_a_settings_name_is_one_whatever_its_case_and_separators(key, name):
    assert normalise_key(key) == name
    assert Statement(key, "1").name == name


def test_identifiers_are_the_names_with_a_digit():
    assert identifiers("pg-11 and web-3, checkout-41 x2 a_b9 Pg-12 plain 42") == \
        {"pg-11", "web-3", "checkout-41", "x2", "a_b9", "pg-12"}


@pytest.mark.parametrize(("line", "statement"), [
    ("listen_port = 19000", ("listen_port", "19000")),
    ("worker_timeout: 50", ("worker_timeout", "50")),
    ("14:RATE_LIMIT_PER_MIN=300", ("RATE_LIMIT_PER_MIN", "300")),  # grep's line number
    ("peak memory: 1843 MiB", ("peak memory", "1843 MiB")),
    ("Version: 7.1.3", ("Version", "7.1.3")),
    ("notAfter=Mar 14 09:30:00 2027 GMT", ("notAfter", "Mar 14 09:30:00 2027 GMT")),  # a date of many words
    ('"port": 24011,', ("port", "24011")),
    ("retries = 4 (12s ago)", ("retries", "4")),  # a trailing note
    ("real\t2m14.310s", ("real", "2m14.310s")),  # a measurement a tab apart
    ("Peak RSS   512 MiB", ("Peak RSS", "512 MiB")),
])
def test_a_named_value_line_states_its_setting(line, statement):
    assert read(line) == [statement]


@pytest.mark.parametrize("line", [
    "name = abc",  # no digit: not what a summary gets wrong
    "a b c d e = 5",  # a name of five words is prose
    "value = 5 6 7",  # three words that are no quantity nor date
    "url = //cdn/1",  # a comment-like value
    "note = (1)",
    "single 5",  # one `name value` is prose
    "loss 0.3",
])
def test_a_line_without_one_value_with_a_digit_states_nothing(line):
    assert read(line) == []


def test_a_json_outputs_leaves_are_settings_named_by_their_key_or_a_generic_keys_parent():
    output = json.dumps({"port": 24011, "db": {"host": "db-3", "pool": 20}, "flag": True, "none": None,
                         "db_endpoint": {"value": "db-3.internal:5432"}, "9x": 5, "name": "api"})
    assert read(output) == [("port", "24011"), ("host", "db-3"), ("pool", "20"),
                            ("db_endpoint", "db-3.internal:5432")]


def test_a_json_lists_values_are_its_keys_and_a_printed_python_dict_is_read_as_json():
    assert read('[{"a": 1}, {"b": 2}]', ) == [("a", "1"), ("b", "2")]
    assert read(json.dumps({"list": [1, 2000]})) == [("list", "1"), ("list", "2000")]
    assert read("{'LOCATION': 'redis://cache-10:6379/1', 'TIMEOUT': 300}") == \
        [("LOCATION", "redis://cache-10:6379/1"), ("TIMEOUT", "300")]
    assert read("{not json", "port = 5") == [("port", "5")]  # not a document: read line by line


def test_a_json_document_gives_at_most_eight_statements():
    assert len(read(json.dumps({f"k{i}": i + 10 for i in range(12)}))) == 8


def test_a_one_row_table_names_each_cell_by_its_column_without_its_unit():
    assert cells("NAME   CPU(cores)   MEMORY(bytes)", "api-7   250m   512Mi") == [
        ("CPU", "250m", ("250m", "512Mi"), "api-7"), ("MEMORY", "512Mi", ("250m", "512Mi"), "api-7")]


def test_a_tables_cells_of_several_rows_are_named_by_their_row_and_a_uniform_column_is_left_out():
    assert cells("NAME   CPU(cores)   MEMORY(bytes)", "api-7   250m   512Mi", "api-8   300m   512Mi") == [
        ("api-7 CPU", "250m", ("250m",), "api-7"), ("api-8 CPU", "300m", ("300m",), "api-8")]


def test_a_table_of_more_than_four_rows_is_a_listing_not_settings():
    rows = [f"a-{i}   {i}/1   {i}d" for i in range(1, 6)]
    assert read("NAME   READY   AGE", *rows) == []
    assert read("NAME   READY   AGE", *rows[:4])  # four rows are settings


def test_a_table_drawn_with_bars_is_read_as_a_table():
    assert cells(" status | count", "--------+-------", " failed |  4093", " ok     |  12") == [
        ("failed count", "4093", ("4093",), "failed"), ("ok count", "12", ("12",), "ok")]


def test_a_table_with_a_plain_words_header_joins_its_extra_words_into_its_last_column():
    row = ("50G", "41G", "9G", "82%")
    assert cells("Filesystem  Size  Used Avail Use% Mounted on", "/dev/sda1  50G  41G  9G  82% /data") == [
        ("Size", "50G", row, "/dev/sda1"), ("Used", "41G", row, "/dev/sda1"), ("Avail", "9G", row, "/dev/sda1"),
        ("Use%", "82%", row, "/dev/sda1")]


def test_csv_rows_are_named_by_their_header_or_else_their_column_numbers():
    assert cells("day,orders,revenue", "2026-12-01,388,9130.25") == [
        ("orders", "388", ("388", "9130.25"), "2026-12-01"), ("revenue", "9130.25", ("388", "9130.25"), "2026-12-01")]
    assert read("2026-12-01,388,9130.25", "2026-12-02,390,9200.5") == [
        ("2026-12-01 column 2", "388"), ("2026-12-01 column 3", "9130.25"),
        ("2026-12-02 column 2", "390"), ("2026-12-02 column 3", "9200.5")]


@pytest.mark.parametrize("lines", [["a,b", "1,2"], ["day,orders,revenue", "2026-12-01,388"],
                                   ["x, y z, w", "1, 2, 3"]])
def test_comma_separated_lines_of_two_columns_uneven_rows_or_spaced_cells_are_no_table(lines):
    assert not is_table(lines)


def test_whether_lines_are_a_table_is_whether_a_table_reader_reads_them():
    assert is_table(["NAME  AGE", "a  1"])
    assert is_table([" a | b", "---+---", " 1 | 2"])
    assert not is_table(["just text"])


@pytest.mark.parametrize(("line", "statements"), [
    ("[api] order=ord_1 elapsed=1h12m09s", [("order", "ord_1"), ("elapsed", "1h12m09s")]),
    ("2026-12-01T10:11Z rows=18,204,551 elapsed=1h12m09s", [("rows", "18,204,551"), ("elapsed", "1h12m09s")]),
    ("epoch 10/10 - loss 0.2094 - val_auc 0.9131", [("epoch", "10/10"), ("loss", "0.2094"), ("val_auc", "0.9131")]),
    ("loss 0.2 | acc 0.9", [("loss", "0.2"), ("acc", "0.9")]),
    ("p50 12ms, p99 40ms", [("p50", "12ms"), ("p99", "40ms")]),
    ("client_max_body_size 25m;", [("client_max_body_size", "25m")]),
    ("vm.swappiness 10", [("vm.swappiness", "10")]),
    ('openjdk version "21.0.4" 2024-07-16', [("openjdk version", "21.0.4")]),
    ("go version go1.22.7 linux/amd64", [("go version", "go1.22.7")]),
])
def test_a_lines_pairs_measurements_directive_or_version_are_its_statements(line, statements):
    assert read(line) == statements


def test_a_setting_stated_again_in_one_output_is_at_its_last_value():
    # A log printing a metric every epoch states its last value.
    assert read("epoch 1 - loss 0.3", "epoch 2 - loss 0.2") == [("epoch", "2"), ("loss", "0.2")]
    assert read("port = 1", "PORT = 2", "host = h3") == [("PORT", "2"), ("host", "h3")]


def test_an_output_gives_its_last_eight_settings():
    assert [k for k, _ in read(*(f"k{i} = {i}" for i in range(10)))] == [f"k{i}" for i in range(2, 10)]


@pytest.mark.parametrize(("line", "value"), [
    ("oldest_age_seconds: 1800", "1800 seconds"), ("timeout_ms = 250", "250 ms"), ("heap_mb: 512", "512 mb"),
    ("size_bytes: 12.5", "12.5 bytes"), ("use_pct: 5", "5 %"), ("name_secs: 3", "3 s"),
    ("wait_millis: 3", "3 ms"), ("idle_mins: 3", "3 min"),
    ("timeout_ms = 250ms", "250ms"),  # a value with its own unit keeps it
    ("items_count = 5", "5"),  # a name without a unit
])
def test_a_plain_number_under_a_name_that_says_its_unit_takes_that_unit(line, value):
    assert read(line)[0][1] == value


def test_named_values_are_every_value_a_line_names_a_superseded_one_included():
    assert named_values(["loss = 0.3", "loss = 0.2", "a 1 - b 2", "name = abc", "[min, mean]  3.1ms, 4ms"]) == \
        {"0.3", "0.2", "1", "2"}


@pytest.mark.parametrize(("cells_", "name", "values"), [
    (["Deployment/web-3", "73%/80%", "1.2MB / 800kB", "cpu: 73%", "2", "2", "abc"], "web-3",
     ("73%", "80%", "1.2MB", "800kB", "2")),
    (["web-3", "3"], "web-3", ("3",)),  # a cell that only repeats the row's name is no value
    (["x 12"], "x", ("x 12",)),
])
def test_a_rows_values_are_its_cells_with_a_digit_split_and_without_its_name(cells_, name, values):
    assert row_values(cells_, name) == values


@pytest.mark.parametrize(("command", "lines", "statement"), [
    ("psql --version", ["psql (PostgreSQL) 16.3"], ("psql version", "16.3")),
    ("java -version", ['openjdk version "21.0.4" 2024-07-16'], ("java version", "21.0.4")),
    ("go version", ["go version go1.22.7 linux/amd64"], ("go version", "go1.22.7")),
    ("node -v", ["v20.11.1", "more"], ("node version", "v20.11.1")),
    ("python3 -V", ["Python 3.12.1"], ("python3 version", "3.12.1")),
    ("psql --version", [], None),
    ("ls -v", ["a b"], None),  # its output holds no dotted number
    ("psql", ["16.3"], None),  # not a version command
    ("gcc --version", ["gcc 13"], None),
])
def test_a_version_commands_first_dotted_number_is_its_programs_version(command, lines, statement):
    found = version_statement(command, lines)
    assert (found and (found.key, found.value)) == statement


NAMES = {"rate_limit_per_min", "worker_timeout", "queue_depth", "app_port", "peak_memory", "index_refresh_ms"}


@pytest.mark.parametrize(("text", "statements"), [
    ("RATE_LIMIT_PER_MIN is now 620", [("RATE_LIMIT_PER_MIN", "620")]),
    ("raised worker_timeout from 50 to 100", [("worker_timeout", "100")]),  # the value after "to"
    ("worker_timeout: 50 -> 100", [("worker_timeout", "100")]),
    ("the worker timeout is 50", [("worker timeout", "50")]),  # named in words
    ("rate-limit-per-min is 620 per minute", [("rate-limit-per-min", "620")]),  # "per" is no unit
    ("peak memory was 1843 MiB. Then 12 more", [("peak memory", "1843 MiB")]),  # a clause ends at its full stop
    ("RATE_LIMIT_PER_MIN to 600 and QUEUE_DEPTH to 250", [("RATE_LIMIT_PER_MIN", "600"), ("QUEUE_DEPTH", "250")]),
    ("use 9010 for APP_PORT", [("APP_PORT", "9010")]),  # the value before the name
    ("use 2500 as the INDEX_REFRESH_MS", [("INDEX_REFRESH_MS", "2500 ms")]),
    ("worker_timeout is high", []),
    ("worker_timeout. It is 5", []),
    ("set RATE to 600", []),  # not a known setting
])
def test_a_sentence_restates_a_known_setting_by_the_value_in_its_clause(text, statements):
    assert [(s.key, s.value) for s in restated(text, NAMES)] == statements
    assert restated(text, set()) == []


def test_a_restatement_remembers_the_identifiers_of_its_sentence():
    (said,) = restated("worker_timeout on pg-11 is now 75", NAMES)
    assert (said.value, said.about, said.source) == ("75", frozenset({"pg-11"}), "")


def test_a_name_split_by_punctuation_is_no_mention_of_a_setting():
    assert restated("peak, memory 5", NAMES) == []
    assert [s.value for s in restated("the Peak Memory: 5 and peak-memory 6", NAMES)] == ["5", "6"]


BY_NAME = {"max_connections": ["pg-11/postgresql.conf", "pg-12/postgresql.conf"]}


@pytest.mark.parametrize(("about", "sources"), [
    ({"pg-11"}, ["pg-11/postgresql.conf"]),  # names one of its sources
    ({"pg-13"}, []),  # names a sibling: another server's, not these
    (set(), ["pg-12/postgresql.conf"]),  # names none: the source stated last
    ({"web-3"}, ["pg-12/postgresql.conf"]),  # an identifier of another shape is no sibling
])
def test_a_restatement_corrects_the_source_it_names_else_the_last_unless_it_names_a_sibling(about, sources):
    assert corrected_sources(Statement("max_connections", "200", about=frozenset(about)), BY_NAME) == sources
    assert corrected_sources(Statement("other", "200"), BY_NAME) == []


def test_the_latest_value_of_a_setting_is_per_source_the_last_stated_and_a_restatement_corrects_one():
    latest = latest_values([Statement("port", "1", "a.conf"), Statement("port", "2", "b.conf"),
                            Statement("port", "3", "a.conf"), Statement("PORT", "4")])
    # a.conf stated again is the newest source, so the restatement (no source) corrects it
    assert list(latest) == [("b.conf", "port"), ("a.conf", "port")]
    assert [(s.key, s.value, s.source) for s in latest.values()] == [("port", "2", "b.conf"), ("port", "4", "a.conf")]


def test_a_restatement_of_a_setting_never_stated_by_a_source_is_no_setting():
    assert latest_values([Statement("port", "9")]) == {}


def test_a_bar_tables_column_keeps_the_capital_x_at_its_ends():
    # Issue 43, retention seed 5301: only the bars and spaces are stripped from the header.
    assert [(s.name, s.value) for s in structured([" status | MAX", "--------+-----", " failed | 4093"])] == \
        [("max", "4093")]


def test_a_loose_table_of_exactly_its_most_rows_is_read():
    # Issue 43, retention seed 5301: a header and MAX_TABLE_ROWS (4) rows is a table, not a listing.
    df = ["Filesystem Size Used Avail Use% Mounted on", "/dev/sda1 50G 41G 9G 82% /", "/dev/sdb1 100G 10G 90G 10% /data",
          "tmpfs 2G 0 2G 0% /run", "/dev/sdc1 20G 5G 15G 25% /srv"]
    assert ("/dev/sda1_size", "50G") in [(s.name, s.value) for s in structured(df)]
