"""The structural check's rules of round nine (issue 46): general readers for the causes of blind_15's held facts
called lost (sizes and byte counts in other units, numbers grouped by dots, a thing named by its path's last part)
and of a lost fact called kept that the path rule exposed (a numbered list's marker read as a value). Each test
plants one history and one summary and asks what the score says of one fact, or reads through the public reader it
names."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.facts import FactKind
from compaction_app.engine.retention.match import (
    Segment,
    abbreviates,
    about_another,
    source_ids,
    states_value,
)
from compaction_app.engine.retention.quantities import quantity_of, states_byte_count, states_quantity
from compaction_app.engine.retention.statements import measured_line
from compaction_app.engine.retention.values import dot_grouped
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output


@pytest.mark.parametrize(("text", "held"), [
    ("3,1 Go", True), ("3.1 GB", True), ("3.1 GiB", True), ("3174 MiB", True), ("3,1 Mo", False),
    ("3.1 MB", False), ("31 GiB", False),
])
def test_a_size_with_a_decimal_prefix_states_the_same_number_with_the_binary_one(text, held):
    # du's `3.1G` is GiB; most writers call it "3.1 GB" or "3,1 Go". A prefix of another rank is a wrong unit.
    assert states_quantity(text, quantity_of("3.1G")) is held


@pytest.mark.parametrize(("text", "held"), [
    ("MemoryMax 1536 MiB", True), ("MemoryMax=1.5G", True), ("1.5 GiB", True), ("1610.6 MB", True),
    ("MemoryMax 1536 KiB", False), ("MemoryMax=2G", False), ("1536 ms", False),
])
def test_a_byte_count_is_stated_by_a_size_of_two_significant_digits_that_agrees(text, held):
    # `MemoryMax=1610612736` is 1.5 GiB; "2G" rounds 1.5-2.5 GiB, too coarse to say which count it was.
    assert states_byte_count(text, 1610612736) is held


def test_a_number_under_a_kibibyte_is_no_byte_count():
    # A count, a port or a limit of a few hundred is not read as a size: "1 kB" does not state 1000 of anything.
    assert not states_byte_count("1 kB", 1000)
    assert states_byte_count("1 KiB", 1024)


SYSTEMD = output("systemctl show ingest-4.service -p MemoryMax -p TasksMax",
                 "MemoryMax=1610612736\nTasksMax=256")


@pytest.mark.parametrize(("claim", "held"), [
    ("- ingest-4.service: MemoryMax 1536 MiB", True),
    ("- ingest-4.service: MemoryMax 1536 KiB", False),
    ("- ingest-4.service: MemoryMax 256 MiB", False),
])
def test_a_memory_limit_in_bytes_is_kept_by_its_conversion_and_lost_by_a_wrong_unit(claim, held):
    assert kept(SYSTEMD, claim, FactKind.VALUE, "1610612736") is held


@pytest.mark.parametrize(("text", "found"), [
    ("Batchgröße 4.007", {4007}), ("1.048.576 Bytes", {1048576}), ("version 1.22.7", set()), ("4.0071", set()),
    ("took 4.5 s", set()),
])
def test_a_whole_number_grouped_by_dots_is_read_as_its_thousands(text, found):
    assert dot_grouped(text) == frozenset(found)


YAML = output("cat deploy/pipeline-4.yaml", "pipeline:\n  batch:\n    size: 4007\n    timeout: 45s\n  pool: 12")


@pytest.mark.parametrize(("claim", "held"), [
    ("- deploy/pipeline-4.yaml: Batchgröße (size) 4.007", True),
    ("- deploy/pipeline-4.yaml: Batchgröße (size) 4.070", False),
])
def test_a_setting_written_with_dots_between_its_thousands_is_kept(claim, held):
    assert kept(YAML, claim, FactKind.VALUE, "4007") is held


def test_a_paths_last_part_names_what_was_read_from_it():
    # "spool-10: 3,1 Go" names the folder `du -sh /var/lib/pipeline/spool-10` measured.
    assert "spool-10" in source_ids("du -sh /var/lib/pipeline/spool-10")


DU = output("du -sh /var/lib/pipeline/spool-10", "3.1G\t/var/lib/pipeline/spool-10")


@pytest.mark.parametrize(("claim", "held"), [
    ("- spool-10: 3,1 Go", True), ("- spool-10: 3.1 GiB", True), ("- spool-10: 3,1 Mo", False),
    ("- spool-11: 3,1 Go", False),
])
def test_a_folders_size_is_kept_when_the_summary_names_it_by_its_last_part(claim, held):
    assert kept(DU, claim, FactKind.VALUE, "spool-10") is held


@pytest.mark.parametrize(("text", "held"), [
    ("3. refunds-180 Makefile", False), ("3) refunds-180 Makefile", False), ("refunds-180: PARALLEL 3", True),
    ("1. refunds-180: PARALLEL 3", True),
])
def test_a_numbered_lists_marker_is_no_value_of_its_item(text, held):
    assert states_value(Segment(text), "3") is held


@pytest.mark.parametrize(("value", "held"), [("= 3", True), (":= 3", True), ("=", False)])
def test_an_assignments_operator_is_no_part_of_its_value(value, held):
    # `PARALLEL := 3` read as "= 3": the value is 3, compared as a number, so a list marker "3." does not state it.
    assert states_value(Segment("3. refunds-180 Makefile, PARALLEL 3"), value) is held
    assert not states_value(Segment("3. refunds-180 Makefile, PARALLEL 5"), value)


@pytest.mark.parametrize(("text", "other"), [
    ("tf plan stage-8: +4 ~1 -2", True), ("tf plan stage-7: +4 ~1 -2", False), ("the plan adds 4", False),
])
def test_a_sibling_of_a_paths_stem_is_about_another_thing(text, other):
    # `stage-8` names another environment than the one `-var-file=env/stage-7.tfvars` planned.
    assert about_another(Segment(text), "terraform plan -no-color -var-file=env/stage-7.tfvars") is other


@pytest.mark.parametrize(("line", "statement"), [
    ("5.03s call     tests/etl_4/test_load.py::test_bulk_insert", ("test_bulk_insert_call", "5.03s")),
    ("1.60s setup    tests/etl_4/test_load.py::test_bulk_insert", ("test_bulk_insert_setup", "1.60s")),
    ("1.2G\tlogs/ingest-4/", ("ingest_4", "1.2G")),
    ("1204 src/a.py", None),  # a bare count is no measurement
    ("12 passed tests/a.py", None),  # nor a count and its word
    ("5.03s call tests/a.py::", None),  # nothing named after the last separator
    ("5.03s call and then tests/a.py", None),  # more than one word before the name
])
def test_a_measurement_before_what_it_measured_is_that_things_statement(line, statement):
    found = measured_line(line)
    assert (found if found is None else (found.name, found.value)) == statement


DURATIONS = output("pytest --durations=3 -q tests/etl_4",
                   "........ [100%]\n=========== slowest 3 durations ===========\n"
                   "5.03s call     tests/etl_4/test_load.py::test_bulk_insert\n"
                   "1.60s setup    tests/etl_4/test_load.py::test_bulk_insert\n"
                   "0.41s call     tests/etl_4/test_schema.py::test_columns\n8 passed in 7.31s")


@pytest.mark.parametrize(("claim", "held"), [
    ("- etl_4 test_bulk_insert: 5.0 s (call)", True),
    ("- test_bulk_insert de etl_4 prend 5030 ms.", True),
    ("- Dans tests/etl_4, test_bulk_insert prend 1.60 s.", False),  # its setup time
    ("- test_bulk_insert de etl_4 prend 5.03 ms.", False),
])
def test_a_tests_call_time_is_kept_by_a_conversion_and_lost_to_its_setup_time(claim, held):
    assert kept(DURATIONS, claim, FactKind.VALUE, "5.03") is held


@pytest.mark.parametrize(("token", "name", "reading"), [
    ("pl-131.yaml", "pipeline-131.yaml", "same"), ("stg-11", "staging-11", "same"),
    ("pipeline-131.yml", "pipeline-131.yaml", "same"), ("pl-221.yaml", "pipeline-220.yaml", "sibling"),
    ("pipeline-131.yaml", "pipeline-131.yaml", None),  # the name itself, not written short
    ("stage-8", "stage-7", None),  # no word cut short (a sibling by shape, `about_another`'s first rule)
    ("pq-131.yaml", "pipeline-131.yaml", None),  # q is no letter of pipeline
    ("il-131.yaml", "pipeline-131.yaml", None),  # letters of pipeline, but not its first
    ("pl-7-v2", "pipeline-x-v2", None),  # a number where the name has a word
    ("pipelines-131.yaml", "pipeline-131.yaml", None),  # longer, not shorter
    ("pl_131.yaml", "pipeline-131.yaml", None), ("pl-131", "pipeline-131.yaml", None),  # another skeleton
    ("web-a", "website-a", None),  # no digit: nothing tells one thing from another
])
def test_a_name_written_short_is_the_same_thing_or_a_sibling(token, name, reading):
    assert abbreviates(token, name) == reading


BATCH = output("cat deploy/pipeline-220.yaml", "pipeline:\n  batch:\n    size: 5540\n    timeout: 45s\n  pool: 12")


@pytest.mark.parametrize(("claim", "held"), [
    ("- pl-220.yaml: Batchgröße 5.540", True),  # the file written short
    ("- pl-221.yaml: batch.size=5540", False),  # another pipeline's file, written short
])
def test_a_file_written_short_names_its_setting_or_another_files(claim, held):
    assert kept(BATCH, claim, FactKind.VALUE, "5540") is held
