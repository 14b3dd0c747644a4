"""Context-window ids (spec §9)."""

from __future__ import annotations

import uuid

from compaction_app.engine.windows import WindowState, new_window_id


def test_session_starts_at_window_zero_with_first_id_equal_to_current():
    state = WindowState.start(lambda: "w0")
    assert state == WindowState(number=0, window_id="w0", first_window_id="w0", previous_window_id=None)
    assert state.compacted_fields() == {"window_number": 0, "first_window_id": "w0", "window_id": "w0"}


def test_advance_increments_number_and_links_previous_keeping_first():
    state = WindowState.start(lambda: "w0").advance(lambda: "w1").advance(lambda: "w2")
    assert state == WindowState(number=2, window_id="w2", first_window_id="w0", previous_window_id="w1")
    assert state.correlation_id("thread") == "thread:2"


def test_new_window_ids_are_uuid7():
    assert uuid.UUID(new_window_id()).version == 7
