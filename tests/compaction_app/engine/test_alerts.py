"""Incremental alert detection: loops, compact-forget-re-read (with its token tax), failure streaks, storms."""

from __future__ import annotations

import json

from compaction_app.engine.alerts import (
    AlertKind,
    Thresholds,
    Watch,
    dropped_fetches,
    is_idle,
    on_attempt,
    on_compaction,
    on_turn,
    storm,
)

T = Thresholds(loop_turns=2, reread_turns=3, reread_min_calls=2, failure_streak=3)


def read(call_id: str, path: str) -> list[dict]:
    return [{"type": "function_call", "call_id": call_id, "name": "read_file", "arguments": json.dumps({"path": path})},
            {"type": "function_call_output", "call_id": call_id, "output": "x"}]


def test_usage_back_above_the_limit_soon_after_a_compaction_is_a_loop_alerted_once():
    watch = on_compaction(Watch(), compaction_id=7, dropped={}, thresholds=T)
    watch, alerts = on_turn(watch, items=[], item_tokens=[], tokens_in_window=950, limit=900, thresholds=T)
    assert [a.kind for a in alerts] == [AlertKind.LOOP] and alerts[0].compaction_ids == (7,)
    watch, alerts = on_turn(watch, items=[], item_tokens=[], tokens_in_window=990, limit=900, thresholds=T)
    assert alerts == []


def test_late_usage_above_the_limit_is_not_a_loop():
    watch = on_compaction(Watch(), compaction_id=7, dropped={}, thresholds=T)
    for _ in range(2):
        watch, _ = on_turn(watch, items=[], item_tokens=[], tokens_in_window=10, limit=900, thresholds=T)
    watch, alerts = on_turn(watch, items=[], item_tokens=[], tokens_in_window=950, limit=900, thresholds=T)
    assert alerts == []


def test_re_reading_dropped_files_counts_the_tax_and_alerts():
    dropped = dropped_fetches(read("a", "src/x.py") + read("b", "src/y.py"))
    watch = on_compaction(Watch(), compaction_id=3, dropped=dropped, thresholds=T)
    watch, alerts = on_turn(watch, items=read("c", "src/x.py"), item_tokens=[5, 120], tokens_in_window=1,
                            limit=900, thresholds=T)
    assert alerts == [] and watch.reread_tokens == 120
    watch, alerts = on_turn(watch, items=read("d", "src/y.py") + read("e", "src/new.py"),
                            item_tokens=[5, 80, 5, 999], tokens_in_window=1, limit=900, thresholds=T)
    assert [a.kind for a in alerts] == [AlertKind.REREAD] and watch.reread_tokens == 200
    assert watch.reread_labels == ["src/x.py", "src/y.py"]
    assert Watch.from_json(json.loads(json.dumps(watch.to_json()))) == watch


def test_re_reads_after_the_watch_window_are_not_counted():
    watch = on_compaction(Watch(), compaction_id=3, dropped=dropped_fetches(read("a", "src/x.py")), thresholds=T)
    for _ in range(3):
        watch, _ = on_turn(watch, items=[], item_tokens=[], tokens_in_window=1, limit=900, thresholds=T)
    watch, _ = on_turn(watch, items=read("z", "src/x.py"), item_tokens=[5, 50], tokens_in_window=1, limit=900,
                       thresholds=T)
    assert watch.reread_tokens == 0


def test_a_streak_of_failed_attempts_alerts_and_a_success_resets_it():
    watch = Watch()
    for attempt in (1, 2):
        watch, alerts = on_attempt(watch, attempt_id=attempt, failed=True, thresholds=T)
        assert alerts == []
    watch, alerts = on_attempt(watch, attempt_id=3, failed=True, thresholds=T)
    assert [a.attempt_ids for a in alerts] == [(1, 2, 3)]
    watch, _ = on_attempt(watch, attempt_id=4, failed=False, thresholds=T)
    watch, alerts = on_attempt(watch, attempt_id=5, failed=True, thresholds=T)
    assert alerts == []


def test_a_storm_is_more_than_n_compactions_in_the_window():
    assert storm(compaction_ids=[1, 2, 3], count=3, minutes=10) is None
    alert = storm(compaction_ids=[1, 2, 3, 4], count=3, minutes=10, fleet=True)
    assert alert.kind is AlertKind.FLEET_STORM and alert.compaction_ids == (1, 2, 3, 4)


def test_the_watch_goes_idle_once_both_windows_have_passed():
    watch = on_compaction(Watch(), compaction_id=1, dropped=dropped_fetches(read("a", "src/x.py")), thresholds=T)
    assert not is_idle(watch)
    for _ in range(3):  # reread_turns = 3 > loop_turns = 2
        watch, _ = on_turn(watch, items=[], item_tokens=[], tokens_in_window=1, limit=900, thresholds=T)
    assert is_idle(watch)
    assert is_idle(Watch())


def test_re_reads_that_cost_little_of_what_the_compaction_freed_raise_no_alert():
    """A normal session re-reads a file or two after a compaction: counted in the tax, but an alert only when the
    re-reads eat a real share (25% by default) of what the compaction freed."""
    dropped = dropped_fetches(read("a", "src/x.py") + read("b", "src/y.py"))
    quiet = on_compaction(Watch(), compaction_id=3, dropped=dropped, thresholds=T, freed=50_000)
    quiet, alerts = on_turn(quiet, items=read("c", "src/x.py") + read("d", "src/y.py"), item_tokens=[5, 3000, 5, 3000],
                            tokens_in_window=1, limit=900, thresholds=T)
    assert alerts == [] and quiet.reread_tokens == 6000
    costly = on_compaction(Watch(), compaction_id=4, dropped=dropped, thresholds=T, freed=20_000)
    costly, alerts = on_turn(costly, items=read("c", "src/x.py") + read("d", "src/y.py"),
                             item_tokens=[5, 3000, 5, 3000], tokens_in_window=1, limit=900, thresholds=T)
    assert [a.kind for a in alerts] == [AlertKind.REREAD] and "6,000 tokens of the 20,000 it freed" in alerts[0].message  # as pages write counts
