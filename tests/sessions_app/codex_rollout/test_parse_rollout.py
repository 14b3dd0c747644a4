import json

import pytest

from compaction_app.engine.items import normalize_kind
from sessions_app.codex_rollout import RolloutImportError, parse_rollout


def test_basic_session_keeps_every_known_kind_in_file_order(read_rollout):
    parsed = parse_rollout(read_rollout("basic_session.jsonl"), source_name="basic_session.jsonl")

    assert [line.kind for line in parsed.lines] == [
        "session_meta", "event_msg", "event_msg", "turn_context",
        *["response_item"] * 7, "event_msg", "event_msg", "world_state", "event_msg",
    ]
    assert [line.line_no for line in parsed.lines] == list(range(1, 16))
    assert [line.event_type for line in parsed.lines if line.kind == "event_msg"] == [
        "task_started", "user_message", "agent_message", "token_count", "task_complete",
    ]
    assert parsed.session_meta["id"] == "0199a1f0-1111-7000-8000-000000000001"
    assert parsed.lines[3].payload["turn_id"] == "t1"
    assert parsed.lines[13].ordinal == 13
    assert parsed.lines[0].timestamp == "2026-04-19T10:37:00.000Z"


def test_unknown_kinds_are_skipped_and_counted_per_kind(read_rollout):
    parsed = parse_rollout(read_rollout("basic_session.jsonl"))

    assert parsed.skipped_kinds == {"future_kind": 2, "telemetry_blob": 1}
    assert parsed.skipped_count == 3
    assert parsed.kind_counts["response_item"] == 7
    assert parsed.kind_counts["world_state"] == 1
    assert parsed.kind_counts["future_kind"] == 2
    assert all(line.kind not in ("future_kind", "telemetry_blob") for line in parsed.lines)


def test_compacted_lines_with_and_without_replacement_history(read_rollout):
    parsed = parse_rollout(read_rollout("compactions.jsonl"))
    compacted = [line for line in parsed.lines if line.kind == "compacted"]

    assert [line.line_no for line in compacted] == [13, 25]
    first, legacy = compacted
    assert len(first.payload["replacement_history"]) == 3
    assert first.payload["window_number"] == 1
    assert first.payload["window_id"].endswith("a1")
    assert "replacement_history" not in legacy.payload


def test_legacy_numeric_window_id_maps_to_window_number_and_leaves_window_id_empty(read_rollout):
    parsed = parse_rollout(read_rollout("compactions.jsonl"))
    legacy = next(line for line in parsed.lines if line.line_no == 25)

    assert legacy.payload["window_number"] == 2
    assert "window_id" not in legacy.payload


def test_numeric_window_id_does_not_override_an_explicit_window_number():
    line = {"timestamp": "t", "type": "compacted", "payload": {"message": "", "window_number": 5, "window_id": 4}}
    parsed = parse_rollout([json.dumps(line)])

    assert parsed.lines[0].payload == {"message": "", "window_number": 5}


def test_compaction_summary_alias_is_read_as_compaction():
    item = {"type": "compaction_summary", "encrypted_content": "abc"}
    lines = [
        json.dumps({"timestamp": "t", "type": "response_item", "payload": item}),
        json.dumps({"timestamp": "t", "type": "compacted", "payload": {"message": "", "replacement_history": [item]}}),
    ]
    parsed = parse_rollout(lines)

    assert parsed.lines[0].payload == normalize_kind(item) == {"type": "compaction", "encrypted_content": "abc"}
    assert parsed.lines[1].payload["replacement_history"] == [{"type": "compaction", "encrypted_content": "abc"}]


def test_blank_lines_are_ignored_but_keep_line_numbers():
    line = json.dumps({"timestamp": "t", "type": "response_item", "payload": {"type": "reasoning"}})
    parsed = parse_rollout(["\n", line + "\n", "   \n", line])

    assert [entry.line_no for entry in parsed.lines] == [2, 4]


def test_bad_json_refuses_the_whole_file_naming_every_bad_line(read_rollout):
    with pytest.raises(RolloutImportError) as info:
        parse_rollout(read_rollout("malformed_bad_json.jsonl"), source_name="malformed_bad_json.jsonl")

    err = info.value
    assert [line_no for line_no, _ in err.errors] == [3, 5]
    assert err.errors[0][1].startswith("invalid JSON")
    assert err.errors[1][1] == "compacted.message must be a string"
    assert str(err).startswith("line 3: invalid JSON")
    assert "malformed_bad_json.jsonl" in str(err)
    assert "1 more bad line" in str(err)


def test_truncated_final_line_is_malformed(read_rollout):
    with pytest.raises(RolloutImportError) as info:
        parse_rollout(read_rollout("truncated_last_line.jsonl"))

    assert [line_no for line_no, _ in info.value.errors] == [4]
    assert str(info.value).startswith("line 4: invalid JSON")


def test_wrong_payload_shapes_are_each_reported_with_their_line(read_rollout):
    with pytest.raises(RolloutImportError) as info:
        parse_rollout(read_rollout("malformed_shapes.jsonl"))

    assert info.value.errors == [
        (2, "compacted.replacement_history[1] must be an object"),
        (3, "response_item payload has no string `type`"),
        (4, "a rollout line must be a JSON object"),
        (5, "turn_context line has no `payload`"),
        (6, "event_msg thread_rolled_back.num_turns must be a non-negative integer"),
        (7, "compacted.replacement_history must be a list of items"),
        (8, "missing string `type`"),
        (9, "compacted.window_id must be a string or a non-negative integer"),
    ]
    assert str(info.value).startswith("line 2: compacted.replacement_history[1] must be an object")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"\xff"}}',
         "not valid UTF-8"),
        ('{"type":"event_msg","payload":{"type":"turn_started"}}', "missing string `timestamp`"),
        ('{"timestamp":"t","type":"event_msg","payload":{}}', "event_msg payload has no string `type`"),
        ('{"timestamp":"t","type":"session_meta","payload":{"cwd":"/"}}', "session_meta.id must be a string"),
        ('{"timestamp":"t","type":"compacted","payload":{"message":"","window_number":true}}',
         "compacted.window_number must be a non-negative integer"),
        ('{"timestamp":"t","ordinal":-1,"type":"event_msg","payload":{"type":"x"}}',
         "`ordinal` must be a non-negative integer"),
        ('{"timestamp":"t","type":"response_item","payload":"text"}', "response_item payload must be an object"),
    ],
)
def test_each_malformed_shape_is_refused(raw, message):
    good = '{"timestamp":"t","type":"response_item","payload":{"type":"reasoning"}}'
    with pytest.raises(RolloutImportError) as info:
        parse_rollout([good, raw])

    assert info.value.errors[0][0] == 2
    assert info.value.errors[0][1].startswith(message)


def test_unknown_kind_payload_shape_is_not_checked():
    parsed = parse_rollout(['{"timestamp":"t","type":"brand_new_kind","payload":[1,2]}'])

    assert parsed.lines == []
    assert parsed.skipped_kinds == {"brand_new_kind": 1}
