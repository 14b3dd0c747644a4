"""claims.py: a summary's structured lines read as "subject: value" claims. The first test was written from a
survivor of the retention room's mutation samples (issue 43); the rest state each reader's rule with its
boundaries."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.claims import flat_claims


@pytest.mark.parametrize("row", ["| 3 | checkout 50 load | >= 370 req/s |", "| checkout 50 load | >= 370 req/s |"])
def test_a_table_row_of_two_cells_after_its_number_is_one_claim(row):
    assert flat_claims([row]) == ["checkout 50 load: >= 370 req/s"]


@pytest.mark.parametrize(("line", "claim"), [
    ('{"topic": "checkout 50 load", "value": ">= 370 req/s"}', "checkout 50 load: >= 370 req/s"),
    ('  {"a": "x", "b": 3, "c": 1.5},', "x: 3, 1.5"),  # a JSON line of a list: its comma and indent
    ('{"a": "x", "b": " ", "d": [1], "e": null, "c": "y"}', "x: y"),  # blank, nested and null values say nothing
])
def test_a_json_object_on_one_line_is_its_first_value_naming_the_rest(line, claim):
    assert flat_claims([line]) == [claim]


@pytest.mark.parametrize("line", ['{"a": "x"}', '{"a": "x", "b": null}', "[1, 2]", '["a", "b"]', "{bad json}",
                                  "not json", '{"a": "x"'])
def test_a_json_line_with_one_value_or_no_object_is_no_claim(line):
    assert flat_claims([line]) == []


@pytest.mark.parametrize(("row", "claim"), [
    ("| a | b | c |", "a: b c"),
    ("| 12. | x | y |", "x: y"),  # a numbered row: the number left out
    ("| 1234 | x | y |", "1234: x y"),  # four digits are a value, not a row number
    ("|  | x |  | y |", "x: y"),  # empty cells left out
])
def test_a_table_row_is_its_first_cell_naming_the_others(row, claim):
    assert flat_claims([row]) == [claim]


@pytest.mark.parametrize("line", ["|---|---:|", " | :--- | --- |", "| only |", "a | b", "| 7 | only |"])
def test_a_tables_rule_line_or_a_row_of_one_cell_is_no_claim(line):
    assert flat_claims([line]) == []


def test_a_yaml_item_is_its_fields_values_the_first_naming_it():
    lines = ["- topic: checkout 50 load", '  value: ">= 370 req/s"', "- topic: b", "  value: 2", "  note: 'n'"]
    assert flat_claims(lines) == ["checkout 50 load: >= 370 req/s", "b: 2, n"]


@pytest.mark.parametrize("lines", [
    ["- topic: alone", "- topic: x", "plain line", "  value: 3"],  # an item of one field; a field after prose
    ["topic: a", "value: b"],  # fields without an item's dash are no item
])
def test_fields_that_are_no_item_of_two_or_more_give_no_claim(lines):
    assert flat_claims(lines) == []


def test_an_outline_heading_with_one_bullet_under_it_is_one_claim():
    lines = ["1. tenant 20 deadline", "   - 12 September 2027", "2. other:", "   - a", "   - b", "3. last"]
    assert flat_claims(lines) == ["tenant 20 deadline: 12 September 2027"]


def test_an_outlines_claim_is_its_heading_and_its_one_direct_bullet():
    # Two bullets under "head" (one nested) are a section; "child" has one bullet under it.
    assert flat_claims(["- head:", "  - child", "    - grandchild"]) == ["child: grandchild"]
    assert flat_claims(["head", "  plain child"]) == []  # a line under a heading with no marker is prose


def test_plain_lines_give_no_claim_and_each_structure_gives_its_own():
    lines = ['{"a": "x", "b": "y"}', "| k | v |", "- topic: t", "  value: v", "plain"]
    assert flat_claims(lines) == ["x: y", "k: v", "t: v"]


def test_an_outline_headings_colon_is_not_part_of_its_claims_subject():
    # Issue 43, retention seed 5301: `deadline:` over one bullet is the claim "deadline: ...", not "deadline:: ...".
    assert flat_claims(["deadline:", "  - 12 September 2027"]) == ["deadline: 12 September 2027"]
