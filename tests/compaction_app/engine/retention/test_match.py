"""match.py: whether a summary's segment states a fact. The first tests were written from the survivors of the
retention room's mutation samples (issue 43), read through `score_compaction`; the rest state each rule directly,
with its boundaries."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.facts import FactKind
from compaction_app.engine.retention.match import (
    Segment,
    about_another,
    anchors_of,
    distinctive,
    holds_value,
    is_anchor,
    is_version_setting,
    mislabelled,
    names_of,
    names_source,
    normalise,
    setting_words,
    source_ids,
    stated_values,
    states,
    states_row,
    states_setting,
    states_value,
    status_pattern,
    stem,
    tokens,
    words_of,
)
from compaction_app.engine.retention.quantities import quantity_of
from compaction_app.engine.retention.values import number_of
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output

DEPLOYMENTS = output("kubectl get deployments -n shop", "NAME        READY   UP-TO-DATE   AVAILABLE   AGE\n"
                                                        "reconciler  2/2     2            2           12d")


@pytest.mark.parametrize(("claim", "held"), [
    ("- the reconciler deployment: 2/2 ready, 2 up to date, 2 available", True),
    ("- reconcilers: 2/2 ready, 2 up to date, 2 available", True),
    ("- the reconciling deployment: 2/2 ready, 2 up to date, 2 available", True),
    ("- the deployment: 2/2 ready, 2 up to date, 2 available", False),
])
def test_a_row_is_named_by_its_name_in_another_inflection(claim, held):
    # The row stated but for its age: kept only when the claim names the row.
    assert kept(DEPLOYMENTS, claim, FactKind.VALUE, "AGE") is held


READ = [fcall("r", "exec_command", cmd="sed -n 200,220p billing/totals.py"),
        fout("r", exec_out(0, "    return amount.quantize(CENT)"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- read src/billing/totals.py:212, which rounds half up", True),
    ("- src/billing/totals.py rounds half up", True),
    ("- read src/billing/ledger.py:212", False),
])
def test_a_place_names_its_file_by_any_tail_of_its_path(claim, held):
    assert kept(READ, claim, FactKind.FILE_READ, "totals.py") is held


# The rules of match.py, each with its boundaries.

def test_a_text_is_compared_lower_case_without_markdown_quoting_or_extra_whitespace():
    assert normalise("  Some `Code` **bold** \"q\" 's'  ") == "some code bold q s"
    assert tokens("src/a.py: ok. --flag- x:y 1.5. -") == ["src/a.py", "ok", "flag", "x:y", "1.5"]


@pytest.mark.parametrize(("word", "stemmed"), [
    ("fail", "fail"), ("fails", "fail"), ("failed", "fail"), ("failing", "fail"), ("failure", "fail"),
    ("running", "run"), ("stopped", "stop"), ("buzzing", "buzz"), ("fizzed", "fizz"),  # s, l, z stay doubled
    ("files", "fil"), ("file", "fil"), ("reconcile", "reconcil"), ("reconciling", "reconcil"),
    ("nations", "nation"), ("played", "play"), ("calls", "call"),
    ("cats", "cats"), ("ties", "ties"),  # four letters are left as they are
    ("not", "not"),  # a word that carries a constraint is kept whole
])
def test_a_word_is_stemmed_lightly_so_its_inflections_meet(word, stemmed):
    assert stem(word) == stemmed


@pytest.mark.parametrize(("token", "anchor"), [
    ("42", True), ("7", False), ("-5", False), ("1.5", True), ("1,000", True), ("12:30", True),
    ("2026-11-26", True), ("8000-8100", True), ("abc1", True), ("x1", True), ("snake_case", True), ("a/b", True),
    ("a.b", True), ("CamelCase", True), ("HTTPServer", True), ("plain", False), ("ABC", False),
])
def test_an_anchor_is_an_identifier_or_a_number_of_two_digits_or_more(token, anchor):
    assert is_anchor(token) is anchor


def test_a_texts_anchors_are_its_identifiers_numbers_and_long_options_in_order_without_repeats():
    assert anchors_of("Run `pytest tests/a.py` --maxfail=1 -x on ORD-4801 port 18001, 7 and 42 42; see FooBar.") == \
        ("tests/a.py", "maxfail", "ord-4801", "18001", "42", "foobar")


def test_a_texts_words_are_its_stemmed_content_words_constraints_kept():
    assert words_of("The failing tests must not be run again and the cache") == \
        ("fail", "test", "must", "not", "run", "cach")


SEGMENT = Segment("Read src/pay/ledger.py:212 and tests/x.py::test_y; 1,287 rows at 6:00 for \u20ac1,700/month "
                  "Mon\u2013Thu, it has to finish; GET /x -> 404; Bad Gateway at host:5432")


@pytest.mark.parametrize(("anchor", "held"), [
    ("src/pay/ledger.py", True), ("pay/ledger.py", True), ("ledger.py", True),  # a path's tails
    ("tests/x.py", True), ("test_y", True),  # a test id's parts
    ("1287", True),  # a number's thousands separators
    ("06:00", True),  # a clock's leading zero
    ("700", True),  # a number per unit
    ("host", True), ("5432", True),  # host:port's parts
    ("ledger.py:212", True), ("src/pay/ledger.py:212", True), ("ledger.py:213", False), ("merge.go:220", False),
    ("502", True),  # "Bad Gateway" says 502
])
def test_a_segment_holds_an_anchor_in_any_of_the_forms_a_summary_writes_it(anchor, held):
    assert SEGMENT.has_anchor(anchor) is held


def test_a_segments_words_include_what_its_forms_say():
    assert {"monday", "thursday", "month", "must", "not", "found"} <= SEGMENT.words  # Mon, /month, has to, 404


def test_a_digest_is_held_by_any_prefix_of_seven_characters_or_more():
    assert Segment("commit 4b1c9e2 landed").has_anchor("4b1c9e2f7a")
    assert not Segment("commit 4b1c9e2 landed").has_anchor("4b1c9e3f7a")
    assert not Segment("commit 4b1c9e landed").has_anchor("4b1c9e2f7a")  # six characters
    assert not Segment("commit 1234567 landed").has_anchor("12345678")  # digits alone are a number


def test_a_name_inside_a_compound_token_is_a_whole_part_of_it():
    segment = Segment("ingest-11_run_time and web-3/x")
    assert segment.in_compound("ingest-11") and segment.in_compound("web-3") and segment.in_compound("run")
    assert not segment.in_compound("gest-1")
    assert segment.name_parts() == {"ingest", "run", "tim", "web"}


@pytest.mark.parametrize(("code", "text", "said"), [
    (1, "exit code: 1", True), (1, "exited with 1", True), (1, "Process exited with code 1", True),
    (1, "exit_code: 1", True), (1, "(exit 1)", True), (1, "status 1", True), (1, "returned 1", True),
    (1, "rc=1", True), (1, "it failed", True), (2, "crashed", True),
    (0, "passed", True), (0, "ok", True), (0, "exit 0", True),
    (1, "exit code: 12", False), (0, "failed", False), (1, "passed", False), (0, "okay", False),
])
def test_an_exit_status_is_stated_as_its_number_beside_an_exit_word_or_as_pass_or_fail_words(code, text, said):
    assert bool(status_pattern(code).search(text)) is said


WORDS = words_of("refund batch retry failed nightly export")  # six words
MORE_WORDS = words_of("refund batch retry failed nightly export again today for finance")  # eight
FIVE_WORDS = words_of("refund batch retry failed nightly")


@pytest.mark.parametrize(("text", "anchors", "words", "values", "held"), [
    ("refund batch retry failed nightly", (), WORDS, 0, True),  # no anchor: 70% of the words, 5 of 6
    ("refund batch retry failed", (), WORDS, 0, False),
    ("ord-1 refund batch retry", ("ord-1",), WORDS, 0, True),  # an anchor: half of them, 3 of 6
    ("ord-1 refund batch", ("ord-1",), WORDS, 0, False),
    ("ord-1 refund batch retry", ("ord-1",), FIVE_WORDS, 0, True),  # half of 5, rounded up
    ("ord-1 refund batch", ("ord-1",), FIVE_WORDS, 0, False),
    ("ord-1 refund batch retry", ("ord-1",), MORE_WORDS, 0, True),  # and at most 3
    ("ord-1 refund batch", ("ord-1",), MORE_WORDS, 0, False),
    ("a_1 b_2 c_3 refund batch", ("a_1", "b_2", "c_3"), WORDS, 0, True),  # three anchors: a third, 2 of 6
    ("a_1 b_2 c_3 refund", ("a_1", "b_2", "c_3"), WORDS, 0, False),
    ("a_1 b_2 c_3 d_4", ("a_1", "b_2", "c_3", "d_4"), WORDS, 0, True),  # four anchors, all held: any words
    ("ord-1 refund batch", ("ord-1",), MORE_WORDS, 1, True),  # an anchor and a value: 2 words
    ("ord-1 refund", ("ord-1",), MORE_WORDS, 1, False),
    ("refund batch retry", (), MORE_WORDS, 1, True),  # a value alone: 3 words
    ("refund batch", (), MORE_WORDS, 1, False),
    ("ord-1", ("ord-1",), ("refund", "batch"), 0, False),  # at least one word
    ("pytest in src/b.py", ("src/a.py",), ("pytest",), 0, False),  # every anchor
    ("anything", (), (), 0, False),  # nothing to hold
    ("anything", (), (), 1, True),  # its values, checked by the caller
])
def test_a_segment_states_a_fact_by_every_anchor_and_a_share_of_its_words(text, anchors, words, values, held):
    assert states(Segment(text), anchors=anchors, words=words, values=values) is held


def test_a_fact_with_a_status_is_stated_with_it_and_a_given_cover_overrides_the_share():
    assert states(Segment("make deploy exit 2"), anchors=(), words=("mak", "deploy"), status=2)
    assert not states(Segment("make deploy exit 1"), anchors=(), words=("mak", "deploy"), status=2)
    assert states(Segment("refund"), anchors=(), words=WORDS, cover=0.1)
    assert not states(Segment("nothing"), anchors=(), words=WORDS, cover=0.1)


def test_a_failure_line_keeps_its_names_and_half_its_numbers_or_all_its_numbers_without_names():
    anchors = ("web-3", "503", "http/1.1", "12345")
    assert states(Segment("pod web-3 crashed 503"), anchors=anchors, words=(), loose_numbers=True)
    assert not states(Segment("pod web-3 crashed"), anchors=anchors, words=(), loose_numbers=True)
    assert states(Segment("got 503"), anchors=("503", "http/1.1"), words=(), loose_numbers=True)
    assert not states(Segment("got 504"), anchors=("503", "http/1.1"), words=(), loose_numbers=True)


def test_a_settings_words_are_its_names_stemmed_parts_without_stop_words():
    assert setting_words("listen_port") == {"listen", "port"}
    assert setting_words("suite wall time") == {"suit", "wall", "tim"}
    assert setting_words("HostPort") == {"host", "port"}
    assert setting_words("the_x") == frozenset()


@pytest.mark.parametrize(("value", "text", "as_version", "held"), [
    ("1843 MiB", "peak 1.8 GiB", False, True),
    ("2027-03-14", "until 14 March 2027", False, True),
    ("16.3", "psql 16.3", True, True),
    ("16.3", "psql 16.30", True, False),  # a version's digits exactly
    ("go1.22.7", "Go 1.22.7", False, True),
    ("v1.2.3", "release v1.2.3-rc1", False, True),
    ("0.9131", "auc 91.3%", False, True),
    ("db-3.internal:5432", "db-3.internal port 5432", False, True),
    ("3A1F229B00112233", "serial 3a:1f:22:9b:00:11:22:33", False, True),  # a hex id written in pairs
    ("3A1F229B00112233", "serial 3a:1f:22:9b:00:11:22:34", False, False),
    ("ord_77", "order ord_77", False, True),
    ("ord_77", "order ord_78", False, False),
    ("", "x", False, False),
])
def test_a_value_is_stated_in_any_form_of_what_it_is(value, text, as_version, held):
    assert states_value(Segment(text), value, as_version=as_version) is held


@pytest.mark.parametrize(("value", "alone"), [
    ("2027-03-14", True), ("1.2.3", True), ("postgres://x", True), ("db-3.internal:5432", True),
    ("abc123def", True), ("ab1234", True),
    ("v1.2", False), ("ab123", False), ("a12345", False), ("1843MiB", False), ("ord 77", False), ("123456", False),
])
def test_a_distinctive_value_is_a_date_a_long_version_an_address_or_a_long_id(value, alone):
    assert distinctive(value) is alone


def test_a_version_setting_is_named_version_or_release():
    assert is_version_setting("openjdk_version") and is_version_setting("release")
    assert not is_version_setting("port")


def test_a_segment_is_about_another_thing_when_it_names_a_sibling_of_the_source_and_not_the_source():
    assert about_another(Segment("checkout-10 answers in 4 ms"), "curl checkout-11")
    assert not about_another(Segment("checkout-11 and checkout-10"), "curl checkout-11")
    assert about_another(Segment("batch 110 done"), "run --batch 111")
    assert not about_another(Segment("batch 111 and batch 110"), "run --batch 111")
    assert not about_another(Segment("all good"), "curl checkout-11")
    assert not about_another(Segment("all good"), "run --batch 111")  # no batch named at all


def test_a_sources_ids_are_its_names_with_digits_its_folders_last_parts_and_file_stems():
    assert source_ids("cat web-11/package.json logs/ingest-11.log results-13.bin shard_21 export/21") == (
        "web-11/package.json", "web-11", "logs/ingest-11.log", "ingest-11.log", "ingest-11", "results-13.bin",
        "results-13", "shard_21", "export/21")


@pytest.mark.parametrize(("text", "source", "named"), [
    ("/export/21 answers", "./scripts/latency --route /export/21", True),
    ("batch 31 takes 331 ms", "hyperfine 'node score.js --batch 31'", True),  # an option and its number
    ("64 pages", "crawl --pages 64", True),  # the number before the option's name
    ("batch 310", "x --batch 31", False),
    ("x", "", False),
])
def test_a_segment_names_a_settings_source_by_its_ids_or_its_options(text, source, named):
    assert names_source(Segment(text), source) is named


@pytest.mark.parametrize(("text", "kwargs", "held"), [
    ("the listen port is 19000", {}, True),  # named by a word of its name
    ("listening on 19000", {}, True),
    ("port 19001", {}, False),
    ("listen_port=19000", {}, True),
    ("listenport 19000", {}, True),
    ("listen-port 19000", {}, True),
    ("x_listen_y: 19000", {}, True),  # a word inside an identifier
    ("web-11 uses 19000", {"setting": "x_y", "source": "cat web-11/app.toml"}, True),  # by its source
    ("expires 2027-03-14", {"setting": "not_after", "value": "2027-03-14"}, True),  # a distinctive value
    ("is 19000", {"setting": "not_after"}, False),
    ("port on checkout-10 is 19000", {"setting": "port", "source": "curl checkout-11"}, False),  # another's
    ("crontab 5 3", {"setting": "crontab_output", "value": "5 ; 3"}, True),  # each of a group's values
    ("crontab 5 4", {"setting": "crontab_output", "value": "5 ; 3"}, False),
    ("psql version 16.30", {"setting": "psql_version", "value": "16.3"}, False),
])
def test_a_setting_is_stated_by_its_name_or_source_and_a_value_that_agrees(text, kwargs, held):
    assert states_setting(Segment(text), **{"setting": "listen_port", "value": "19000", **kwargs}) is held


def test_a_tool_call_states_a_setting_only_by_its_full_name_or_as_the_call_it_was_read_from():
    assert states_setting(Segment("run x; port=19000", tool=True), setting="port", value="19000", source="cat a")
    assert not states_setting(Segment("the listen port 19000", tool=True), setting="listen_port", value="19000",
                              source="cat a.toml")
    assert states_setting(Segment("cat a.toml: listen 19000", tool=True), setting="listen_port", value="19000",
                          source="cat a.toml")


ROW = ("2/2", "2", "2")


def test_a_row_is_stated_named_and_by_more_than_half_of_its_cells():
    assert states_row(Segment("reconciler: 2/2 ready, 2 up to date"), ROW, "reconciler")
    assert not states_row(Segment("deployment: 2/2 ready"), ROW, "reconciler")  # not named
    assert not states_row(Segment("reconciler 5/5"), ROW, "reconciler")  # no value
    assert not states_row(Segment("reconciler 2/2"), ("2/2", "30", "40", "50"), "reconciler")  # 2 cells of 5
    assert states_row(Segment("reconciler 2/2 30"), ("2/2", "30", "40", "50"), "reconciler")  # 3 of 5
    assert not states_row(Segment("x"), (), "r")
    assert states_row(Segment("web-11 50G 41G 9G"), ("50G", "41G", "9G", "82%"), "x", source="df -h web-11/d")


def test_a_tool_call_states_a_row_only_as_the_call_it_was_read_from():
    source = "kubectl get deploy"
    assert not states_row(Segment("reconciler 2/2 2 2", tool=True), ROW, "reconciler", source=source)
    assert states_row(Segment("kubectl get deploy reconciler 2/2 2 2", tool=True), ROW, "reconciler", source=source)


def test_a_facts_stated_values_are_its_dates_money_rates_and_quantities_with_the_words_they_were_written_in():
    values, written = stated_values("deadline 2027-03-14, budget EUR 1,200 at 170 requests per second and 512 MiB")
    assert [kind for kind, _ in values] == ["date", "number", "quantity", "quantity"]
    assert values[1][1][0] == 1200.0 and values[2][1].base == 170.0 and values[3][1].base == 512 * 2**20
    assert {"2027-03-14", "eur", "requests", "mib", "512"} <= written
    assert stated_values("nothing") == ((), frozenset())


def test_a_segment_holds_a_date_a_number_or_a_quantity_in_any_form_that_agrees():
    assert holds_value(Segment("by 14 March 2027"), ("date", "2027-03-14"))
    assert not holds_value(Segment("by 15 March 2027"), ("date", "2027-03-14"))
    assert holds_value(Segment("1.2k EUR"), ("number", number_of("1,200")))
    assert not holds_value(Segment("1.3k"), ("number", number_of("1,200")))
    assert holds_value(Segment("1.8 GiB"), ("quantity", quantity_of("1843 MiB")))


def test_a_claim_mislabels_a_value_when_it_gives_one_numbers_label_to_another():
    assert mislabelled("[ahead 7, behind 9]", "7 ; 9", Segment("9 ahead / 7 behind"))
    assert not mislabelled("[ahead 7, behind 9]", "7 ; 9", Segment("ahead 7, behind 9"))
    assert not mislabelled("[ahead 7, behind 9]", "7 ; 9", Segment("7 and 9"))  # no label said
    assert not mislabelled("[ahead 7, behind 9]", "x", Segment("9 ahead"))  # no number in the value


def test_a_failure_lines_names_leave_out_its_numbers_protocols_measures_and_timestamps():
    # Issue 43, retention seed 5103: each kind left out on its own (a measure is no timestamp, nor one a measure).
    anchors = ("web-3", "503", "http/1.1", "4.05s", "120ms", "2026-12-01t10:11:07z", "10:11:07", "ord_7")
    assert names_of(anchors) == ["web-3", "ord_7"]
