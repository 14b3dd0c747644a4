"""Pinned context: re-injected after the replacement history (once), checked by the scorer, folded from events."""

from __future__ import annotations

import asyncio

import pytest

from compaction_app.engine.compactor import CompactionRequest, HistorySnapshot, run_compaction
from compaction_app.engine.items import user_message
from compaction_app.engine.pins import Pin, PinBudgetExceeded, apply_pins, fold_pins, is_pinned_block
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.windows import WindowState

PIN = Pin(pin_id="p1", kind="constraint", text="Money is always Decimal, never float")


def budget(pin_mode: str):
    s = CompactionSettings(model="m", strategy="token_budget", pin_mode=pin_mode)
    snap = HistorySnapshot(items=[user_message("hello")], active_tokens=10, window=WindowState(0, "w", "w", None),
                           turn_id="t", pins=[PIN])
    return asyncio.run(run_compaction(snapshot=snap, settings=s, request=CompactionRequest(trigger="manual"),
                                      client=None))


def test_a_pin_is_reinjected_and_scored_as_kept():
    outcome = budget("reinject")
    assert is_pinned_block(outcome.replacement_history[-1])
    pins = [v for v in outcome.retention.verdicts if v.fact.kind == "pin"]
    assert [(v.fact.text, v.kept) for v in pins] == [(PIN.text, True)]


def test_check_only_flags_a_lost_pin():
    outcome = budget("check_only")
    assert not any(is_pinned_block(i) for i in outcome.replacement_history)
    assert PIN.text in {f.text for f in outcome.retention.forgotten}


def test_reinjection_replaces_the_older_block_instead_of_stacking():
    once = apply_pins([user_message("x")], [PIN])
    twice = apply_pins(once, [PIN])
    assert sum(is_pinned_block(i) for i in twice) == 1


def test_pins_fold_from_added_and_removed_events():
    events = [{"type": "pin_added", "pin": PIN.to_dict()},
              {"type": "pin_added", "pin": {"id": "p2", "kind": "file", "text": "src/a.py"}},
              {"type": "pin_removed", "pin_id": "p1"}]
    assert [p.text for p in fold_pins(events)] == ["src/a.py"]


def test_a_pin_needs_text_and_a_known_kind():
    with pytest.raises(ValueError):
        Pin(pin_id="x", kind="constraint", text="  ")
    with pytest.raises(ValueError):
        Pin(pin_id="x", kind="wish", text="a")


def test_with_no_pin_left_every_older_pinned_block_is_taken_out():
    from compaction_app.engine.pins import Pin, apply_pins, is_pinned_block, pinned_block

    old = pinned_block([Pin(pin_id="p1", kind="fact", text="gone now")])
    note = pinned_block([])
    history = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}, old, note]
    assert not any(is_pinned_block(i) for i in apply_pins(history, []))
    assert apply_pins(history, [], "check_only") == history


def test_the_pins_budget_refuses_a_pin_that_does_not_fit_and_says_by_how_much():
    import pytest

    from compaction_app.engine.pins import Pin, PinBudgetExceeded, check_budget, pin_budget

    budget, source = pin_budget(usable_window=30_400, configured=None)
    assert budget == 1520 and source == "5% of the 30400-token usable window"
    assert pin_budget(usable_window=30_400, configured=50) == (50, "the policy's pin budget")

    def count(item):
        return len(str(item)) // 4

    small = Pin(pin_id="a", kind="fact", text="short")
    assert check_budget([], small, count=count, budget=200, source="s") <= 200
    with pytest.raises(PinBudgetExceeded) as refused:
        check_budget([small], Pin(pin_id="b", kind="fact", text="x" * 900), count=count, budget=200, source="s")
    assert refused.value.budget == 200 and refused.value.after > 200 and "over their budget of 200" in str(refused.value)


def test_the_pin_budget_refusal_writes_its_counts_with_thousands_separators():
    """The refusal is shown beside the pin form (issue 47 item 7: the pin budget `3040` without separators)."""
    refusal = str(PinBudgetExceeded(used=2_900, after=3_400, budget=3_040, source="the policy's pin budget"))
    assert refusal.startswith("the pins would take 3,400 tokens, over their budget of 3,040 tokens")
    assert "2,900 tokens are pinned already and this pin adds 500" in refusal
