import json

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from sessions_app.codex_rollout import parse_rollout, reconstruct_history, to_compactweb_lines
from tests.sessions_app.codex_rollout.rollout_strategies import (
    any_rollout,
    codex_lines,
    compactweb_fold,
    items,
    to_jsonl,
)


def fold_imported(imported):
    return compactweb_fold((line.kind, line.payload) for line in imported)


def test_legacy_compaction_gets_its_rebuilt_replacement_history_and_is_marked(read_rollout):
    imported = to_compactweb_lines(parse_rollout(read_rollout("compactions.jsonl")))
    legacy = next(line for line in imported if line.source_line_no == 25)

    assert legacy.kind == "compacted"
    assert legacy.payload["legacy_rebuilt"] is True
    assert legacy.payload["window_number"] == 2
    assert legacy.payload["replacement_history"] == [
        user_message("Fix the failing test"),
        user_message("Now add docs"),
        user_message("Run the linter"),
        user_message(SUMMARY_PREFIX + "\nLinter is clean; ready to ship."),
    ]
    modern = next(line for line in imported if line.source_line_no == 13)
    assert "legacy_rebuilt" not in modern.payload


def test_thread_rolled_back_becomes_a_rollback_line_with_the_history_after_it(read_rollout):
    imported = to_compactweb_lines(parse_rollout(read_rollout("rollback_across_compaction.jsonl")))
    last = imported[-1]

    assert last.kind == "rollback"
    assert last.payload == {
        "num_turns": 2,
        "replacement_history": [user_message("Write a parser"), user_message("Add tests")],
        "source": "codex_thread_rolled_back",
        # spec §8.2: the compaction after the newest surviving turn cleared its baseline; the next turn re-injects.
        "reference_context_set": False,
    }
    assert last.source_line_no == 28
    assert not any(line.kind == "event_msg" and line.payload["type"] == "thread_rolled_back" for line in imported)


def test_events_and_turn_contexts_are_kept_and_other_kinds_dropped(read_rollout):
    parsed = parse_rollout(read_rollout("basic_session.jsonl"))
    imported = to_compactweb_lines(parsed)

    assert [line.kind for line in imported] == [
        "event_msg", "event_msg", "turn_context", *["response_item"] * 7, "event_msg", "event_msg", "event_msg",
    ]
    assert [line.source_line_no for line in imported] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15]
    assert imported[0].timestamp == parsed.lines[1].timestamp


def test_fixture_imports_project_to_the_reconstructed_history(read_rollout):
    for name in ("basic_session.jsonl", "compactions.jsonl", "rollback_across_compaction.jsonl"):
        parsed = parse_rollout(read_rollout(name))
        assert fold_imported(to_compactweb_lines(parsed)) == reconstruct_history(parsed).history, name


@settings(max_examples=120, deadline=None)
@given(st.lists(items, max_size=6), any_rollout)
def test_import_then_simple_fold_equals_resume_reconstruction(prefix, lines):
    rollout = [("response_item", item) for item in prefix] + lines
    parsed = parse_rollout(to_jsonl(rollout))

    assert fold_imported(to_compactweb_lines(parsed)) == reconstruct_history(parsed).history


@settings(max_examples=60, deadline=None)
@given(st.lists(codex_lines, max_size=30))
def test_import_does_not_mutate_the_parsed_rollout(lines):
    parsed = parse_rollout(to_jsonl(lines))
    before = json.dumps([line.payload for line in parsed.lines], sort_keys=True)
    to_compactweb_lines(parsed)
    reconstruct_history(parsed)

    assert json.dumps([line.payload for line in parsed.lines], sort_keys=True) == before


def test_rollback_trimming_a_mixed_developer_bundle_marks_the_reference_context_unset():
    mixed = {"type": "message", "role": "developer", "content": [
        {"type": "input_text", "text": "<permissions instructions>x</permissions instructions>"},
        {"type": "input_text", "text": "Persistent project rules."},
    ]}
    lines = [("response_item", user_message("a")), ("response_item", mixed), ("response_item", user_message("b")),
             ("event_msg", {"type": "thread_rolled_back", "num_turns": 1})]
    rollback = to_compactweb_lines(parse_rollout(to_jsonl(lines)))[-1]

    assert rollback.payload["replacement_history"] == [user_message("a")]
    assert rollback.payload["reference_context_set"] is False


def test_rolling_back_the_turn_that_re_injected_context_after_a_compaction_clears_the_reference(read_rollout):
    raw = read_rollout("rollback_across_compaction.jsonl")
    raw[-1] = raw[-1].replace(b'"num_turns":2', b'"num_turns":1')
    rollback = to_compactweb_lines(parse_rollout(raw))[-1]

    assert rollback.kind == "rollback"
    # The dropped turn held the only injected context; a compaction cleared the surviving turn's baseline (§8.2).
    assert rollback.payload["reference_context_set"] is False
    assert len(rollback.payload["replacement_history"]) == 3
