import json

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from sessions_app.codex_rollout import parse_rollout, reconstruct_history

PERM = "<permissions instructions>\nFilesystem sandboxing: workspace-write. Approvals: on-request.\n</permissions instructions>"
ENV = "<environment_context>\n  <cwd>/home/dev/proj</cwd>\n  <shell>bash</shell>\n</environment_context>"


def assistant(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def developer(text):
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def line(kind, payload):
    return json.dumps({"timestamp": "2026-04-19T10:00:00.000Z", "type": kind, "payload": payload})


def event(event_type, **fields):
    return line("event_msg", {"type": event_type, **fields})


def test_base_is_newest_compaction_and_legacy_compaction_is_rebuilt_from_collected_user_messages(read_rollout):
    parsed = parse_rollout(read_rollout("compactions.jsonl"))
    result = reconstruct_history(parsed)

    summary_two = SUMMARY_PREFIX + "\nLinter is clean; ready to ship."
    assert result.history == [
        user_message("Fix the failing test"),
        user_message("Now add docs"),
        user_message("Run the linter"),
        user_message(summary_two),
        user_message("Ship it"),
        assistant("Shipped."),
    ]
    assert parsed.lines[result.base_seq_index].line_no == 13
    assert result.replayed_from == result.base_seq_index + 1
    assert result.legacy_compactions_rebuilt == 1


def test_legacy_compaction_clears_reference_context_and_window_comes_from_its_number(read_rollout):
    result = reconstruct_history(parse_rollout(read_rollout("compactions.jsonl")))

    assert result.reference_context_item is None
    assert not result.has_reference_context_item
    assert result.window_number == 2
    assert result.window_id is None
    assert result.previous_turn_settings == {"model": "gpt-5.2-codex", "comp_hash": None, "realtime_active": None}


def test_window_fields_come_from_newest_surviving_compacted_item():
    history = [user_message("a"), user_message("S")]
    lines = [
        event("task_started", turn_id="t1"),
        event("user_message", message="a"),
        line("turn_context", {"turn_id": "t1", "model": "m1"}),
        line("response_item", user_message("a")),
        line("compacted", {"message": "", "replacement_history": history, "window_number": 3,
                           "window_id": "w3", "previous_window_id": "w2", "first_window_id": "w0"}),
        line("turn_context", {"turn_id": "t1", "model": "m1"}),
        line("response_item", assistant("ok")),
        event("task_complete", turn_id="t1"),
    ]
    result = reconstruct_history(parse_rollout(lines))

    assert result.history == [*history, assistant("ok")]
    assert (result.window_number, result.window_id, result.previous_window_id, result.first_window_id) == (
        3, "w3", "w2", "w0",
    )
    # The turn context written after the compaction re-establishes the baseline (mid-turn compaction).
    assert result.reference_context_item == {"turn_id": "t1", "model": "m1"}
    assert result.has_previous_turn_settings


def test_pre_turn_compaction_clears_the_reference_context_item():
    lines = [
        event("task_started", turn_id="t1"),
        event("user_message", message="a"),
        line("turn_context", {"turn_id": "t1", "model": "m1"}),
        line("response_item", user_message("a")),
        event("task_complete", turn_id="t1"),
        event("task_started", turn_id="t2"),
        line("compacted", {"message": "", "replacement_history": [user_message("a")], "window_number": 1}),
        event("task_complete", turn_id="t2"),
    ]
    result = reconstruct_history(parse_rollout(lines))

    assert result.reference_context_item is None
    assert result.previous_turn_settings == {"model": "m1", "comp_hash": None, "realtime_active": None}


def test_rollback_within_one_window_drops_the_turn_and_its_metadata():
    lines = [
        event("turn_started", turn_id="t1"),
        event("user_message", message="one"),
        line("turn_context", {"turn_id": "t1", "model": "first"}),
        line("response_item", user_message("one")),
        line("response_item", assistant("1")),
        event("turn_complete", turn_id="t1"),
        event("turn_started", turn_id="t2"),
        event("user_message", message="two"),
        line("turn_context", {"turn_id": "t2", "model": "rolled-back"}),
        line("response_item", user_message("two")),
        line("response_item", assistant("2")),
        event("turn_complete", turn_id="t2"),
        event("thread_rolled_back", num_turns=1),
    ]
    result = reconstruct_history(parse_rollout(lines))

    assert result.history == [user_message("one"), assistant("1")]
    assert result.previous_turn_settings["model"] == "first"
    assert result.reference_context_item == {"turn_id": "t1", "model": "first"}


def test_thread_rollback_across_a_compaction_boundary_eats_into_the_replacement_history(read_rollout):
    parsed = parse_rollout(read_rollout("rollback_across_compaction.jsonl"))
    result = reconstruct_history(parsed)

    # Live history before the rollback: [parser, tests, summary, <perm>, <env>, refactor, Refactored.].
    # Two user turns back cuts at the summary; the kept user messages of the replacement history survive.
    assert result.history == [user_message("Write a parser"), user_message("Add tests")]
    # The compaction's turn was rolled back, so no surviving base: replay starts at the top of the file.
    assert result.base_seq_index is None
    assert result.replayed_from == 0
    assert result.previous_turn_settings["model"] == "gpt-5.1-codex"
    assert result.reference_context_item["turn_id"] == "t1"
    # No surviving CompactedItem carries a window: Codex falls back to the number of compacted lines.
    assert result.window_number == 1
    assert result.window_id is None


def test_thread_rollback_of_one_turn_after_compaction_keeps_the_summary_and_trims_injected_context(read_rollout):
    raw = read_rollout("rollback_across_compaction.jsonl")
    raw[-1] = event("thread_rolled_back", num_turns=1).encode()
    result = reconstruct_history(parse_rollout(raw))

    summary = SUMMARY_PREFIX + "\nA parser was written and tested."
    assert result.history == [user_message("Write a parser"), user_message("Add tests"), user_message(summary)]
    assert result.window_number == 1
    assert result.window_id == "0199a1f0-3333-7000-8000-0000000000a1"


def test_rollback_zero_turns_in_a_rollout_changes_nothing():
    lines = [
        line("response_item", user_message("one")),
        line("response_item", assistant("1")),
        event("thread_rolled_back", num_turns=0),
    ]
    assert reconstruct_history(parse_rollout(lines)).history == [user_message("one"), assistant("1")]


def test_rollout_without_turn_events_is_one_segment_and_replays_fully():
    lines = [
        line("response_item", developer(PERM)),
        line("response_item", user_message(ENV)),
        line("response_item", user_message("hi")),
        line("world_state", {"kind": "full"}),
        line("response_item", assistant("hello")),
    ]
    result = reconstruct_history(parse_rollout(lines))

    assert result.history == [developer(PERM), user_message(ENV), user_message("hi"), assistant("hello")]
    assert result.window_number == 0
    assert result.previous_turn_settings is None
    assert result.reference_context_item is None


def test_reconstruction_does_not_mutate_the_parsed_replacement_history():
    base = [user_message("a")]
    lines = [
        line("compacted", {"message": "", "replacement_history": base}),
        line("response_item", assistant("b")),
    ]
    parsed = parse_rollout(lines)
    reconstruct_history(parsed)
    reconstruct_history(parsed)

    assert parsed.lines[0].payload["replacement_history"] == [user_message("a")]
    assert reconstruct_history(parsed).history == [user_message("a"), assistant("b")]
