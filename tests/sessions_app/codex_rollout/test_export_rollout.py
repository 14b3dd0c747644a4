import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction_app.engine.items import user_message
from sessions_app.codex_rollout import (
    RolloutExportError,
    export_lines,
    format_timestamp,
    parse_rollout,
    reconstruct_history,
    to_compactweb_lines,
)
from tests.sessions_app.codex_rollout.rollout_strategies import any_rollout, compactweb_fold, items, to_jsonl

META = {"id": "0199a1f0-9999-7000-8000-000000000009", "cwd": "/srv/app", "cli_version": "0.1.0",
        "model_provider": "simulated", "base_instructions": "Be helpful."}


def assistant(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def cw(seq, kind, payload, minute=0):
    return {"seq": seq, "timestamp": datetime(2026, 5, 1, 12, minute, 0, 123456, tzinfo=UTC), "kind": kind,
            "payload": payload}


def decode(exported):
    return [json.loads(text) for text in exported]


def test_first_line_is_session_meta_with_thread_id_and_compactweb_originator():
    out = decode(export_lines([cw(1, "response_item", user_message("hi"))], session_meta=META))

    assert out[0] == {
        "timestamp": "2026-05-01T12:00:00.123Z",
        "type": "session_meta",
        "payload": {
            "id": META["id"], "timestamp": "2026-05-01T12:00:00.123Z", "cwd": "/srv/app",
            "originator": "compactweb", "cli_version": "0.1.0", "source": "unknown",
            "model_provider": "simulated", "base_instructions": {"text": "Be helpful."},
        },
    }
    assert out[1] == {"timestamp": "2026-05-01T12:00:00.123Z", "type": "response_item", "payload": user_message("hi")}


def test_every_exported_line_is_one_newline_terminated_json_object():
    exported = list(export_lines([cw(1, "response_item", user_message("a\nb"))], session_meta=META))

    assert all(text.endswith("\n") and text.count("\n") == 1 for text in exported)


def test_empty_rollout_exports_session_meta_stamped_with_the_injected_clock():
    out = decode(export_lines([], session_meta=META, now=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)))

    assert len(out) == 1
    assert out[0]["timestamp"] == "2026-01-02T03:04:05.000Z"


def test_session_meta_needs_a_thread_id():
    with pytest.raises(RolloutExportError, match="thread id"):
        list(export_lines([], session_meta={"cwd": "/"}))


def test_compacted_keeps_only_codex_fields_and_omits_nulls():
    payload = {"message": "", "replacement_history": [user_message("a")], "window_number": 2, "window_id": "w2",
               "previous_window_id": "w1", "first_window_id": None, "strategy": "remote_v1", "tokens_before": 900}
    out = decode(export_lines([cw(1, "compacted", payload)], session_meta=META))

    assert out[1]["type"] == "compacted"
    assert out[1]["payload"] == {"message": "", "replacement_history": [user_message("a")], "window_number": 2,
                                 "window_id": "w2", "previous_window_id": "w1"}


def test_compacted_without_replacement_history_cannot_be_exported():
    with pytest.raises(RolloutExportError, match="seq 7"):
        list(export_lines([cw(7, "compacted", {"message": "x"})], session_meta=META))


def test_rollback_is_a_compacted_line_with_the_restored_history_then_a_marker_event():
    restored = [user_message("a"), assistant("1")]
    rollback = {"replacement_history": restored, "compaction_id": 4, "actor": "sam", "reason": "bad summary",
                "window_number": 0, "window_id": "w0"}
    out = decode(export_lines([cw(9, "rollback", rollback)], session_meta=META))

    assert [line["type"] for line in out] == ["session_meta", "compacted", "event_msg"]
    assert out[1]["payload"] == {"message": "", "replacement_history": restored, "window_number": 0, "window_id": "w0"}
    assert out[2]["payload"] == {
        "type": "compactweb_line", "kind": "rollback", "seq": 9,
        "payload": {"compaction_id": 4, "actor": "sam", "reason": "bad summary", "window_number": 0, "window_id": "w0"},
    }


def test_other_compactweb_kinds_are_marker_events_only():
    out = decode(export_lines([cw(3, "policy_change", {"threshold": 1000})], session_meta=META))

    assert out[1:] == [{"timestamp": "2026-05-01T12:00:00.123Z", "type": "event_msg", "payload": {
        "type": "compactweb_line", "kind": "policy_change", "seq": 3, "payload": {"threshold": 1000}}}]


def test_thread_rolled_back_event_is_not_exported_as_a_codex_rollback():
    event = {"type": "thread_rolled_back", "num_turns": 1}
    out = decode(export_lines([cw(1, "event_msg", event)], session_meta=META))

    assert out[1]["payload"]["type"] == "compactweb_line"
    assert out[1]["payload"]["payload"] == event


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 4, 19, 10, 37, 36, 250999, tzinfo=UTC), "2026-04-19T10:37:36.250Z"),
        (datetime(2026, 4, 19, 12, 37, 36, tzinfo=timezone(timedelta(hours=2))), "2026-04-19T10:37:36.000Z"),
        (datetime(2026, 4, 19, 10, 37, 36), "2026-04-19T10:37:36.000Z"),
        ("2026-04-19T10:37:36.250Z", "2026-04-19T10:37:36.250Z"),
        ("2026-04-19T12:37:36.250+02:00", "2026-04-19T10:37:36.250Z"),
    ],
)
def test_timestamps_are_utc_with_milliseconds_and_z(value, expected):
    assert format_timestamp(value) == expected


def test_timestamp_that_is_not_iso_is_refused():
    with pytest.raises(RolloutExportError, match="not ISO-8601"):
        format_timestamp("yesterday")


def _as_compactweb(imported):
    return [{"seq": i, "timestamp": line.timestamp, "kind": line.kind, "payload": line.payload}
            for i, line in enumerate(imported, start=1)]


def _reimport(exported):
    return to_compactweb_lines(parse_rollout(exported, source_name="export.jsonl"))


def test_fixture_export_then_import_gives_the_same_live_history(read_rollout):
    for name in ("basic_session.jsonl", "compactions.jsonl", "rollback_across_compaction.jsonl"):
        parsed = parse_rollout(read_rollout(name))
        lines = _as_compactweb(to_compactweb_lines(parsed))
        exported = list(export_lines(lines, session_meta=parsed.session_meta))
        again = parse_rollout(exported)

        assert compactweb_fold((line.kind, line.payload) for line in _reimport(exported)) == (
            reconstruct_history(parsed).history
        ), name
        # Codex's own resume of the exported file lands on the same history too.
        assert reconstruct_history(again).history == reconstruct_history(parsed).history, name
        assert again.session_meta["id"] == parsed.session_meta["id"]


compactweb_only = st.builds(
    lambda kind, history, reason: (kind, {"replacement_history": history, "reason": reason, "actor": "support"}),
    st.sampled_from(["rollback", "redo"]),
    st.lists(items, max_size=5),
    st.sampled_from(["bad summary", "undo"]),
)


@settings(max_examples=80, deadline=None)
@given(any_rollout, st.lists(st.tuples(st.integers(0, 40), compactweb_only), max_size=4))
def test_export_then_import_round_trips_the_live_history(codex, inserts):
    imported = [(line.kind, line.payload) for line in to_compactweb_lines(parse_rollout(to_jsonl(codex)))]
    for position, line in inserts:
        imported.insert(min(position, len(imported)), line)
    original = [{"seq": i, "timestamp": "2026-04-19T10:00:00.000Z", "kind": kind, "payload": payload}
                for i, (kind, payload) in enumerate(imported, start=1)]
    live = compactweb_fold(imported)

    exported = list(export_lines(original, session_meta=META))

    assert compactweb_fold((line.kind, line.payload) for line in _reimport(exported)) == live
    # Codex's own resume of the exported file restores the same history.
    assert reconstruct_history(parse_rollout(exported)).history == live
