"""Issue 29: how the gateway changes a request's history for operators (plain functions): substitutions of a
prefix, oldest first, and the pinned blocks put back where the recorded history holds them."""

from __future__ import annotations

from compaction_app.engine.pins import Pin, pinned_block
from gateway_app import steering

BASE = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}
BLOCK = pinned_block([Pin(pin_id="p1", kind="constraint", text="never touch prod.yaml")])


def msg(text: str, role: str = "user") -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def test_a_substitution_replaces_the_prefix_codex_keeps_sending_and_ignores_ids_and_pinned_blocks():
    a, b, c = msg("a"), msg("b"), msg("c")
    rule = {"prefix": [a, b], "replacement": [msg("summary of a and b")]}
    assert steering.substituted([{**a, "id": "x"}, BLOCK, b, c], [rule]) == [msg("summary of a and b"), c]
    assert steering.substituted([a, c], [rule]) == [a, c]  # Codex compacted since: the rule no longer applies


def test_substitutions_apply_oldest_first_each_to_what_the_one_before_left():
    a, b, s, c = msg("a"), msg("b"), msg("s"), msg("c")
    compacted = {"prefix": [a, b], "replacement": [s]}
    rolled_back = {"prefix": [s], "replacement": [a, b]}
    assert steering.substituted([a, b, c], [compacted, rolled_back]) == [a, b, c]


def test_pinned_blocks_go_back_where_they_were_recorded_else_first():
    h = [msg("a"), msg("b", "assistant"), msg("c")]
    assert steering.with_pins(h, BLOCK, [(2, BLOCK)]) == [h[0], h[1], BLOCK, h[2]]
    assert steering.with_pins([*h[:2], BLOCK, h[2]], BLOCK, [(2, BLOCK)]) == [*h[:2], BLOCK, h[2]]
    # Codex compacted: its history no longer reaches where the block was: the block in force goes first.
    assert steering.with_pins(h[:1], BLOCK, [(5, BLOCK)]) == [BLOCK, h[0]]
    assert steering.with_pins(h, None) is h


def test_a_pin_position_from_a_stale_control_is_used_only_after_the_item_recorded_before_it():
    """The control (and the pins' places in it) is cached per process for seconds, and another process may have
    changed the recorded history since: a block goes back at its recorded index only where the request has the
    recorded item before it there; elsewhere the block in force goes first, never into the middle or the end."""
    a, b, c = msg("a"), msg("b", "assistant"), msg("c")
    placed = [(2, BLOCK, b)]  # recorded: a, b, BLOCK, c
    assert steering.with_pins([a, {**b, "id": "msg_1"}, c], BLOCK, placed) == [a, {**b, "id": "msg_1"}, BLOCK, c]
    # Codex compacted since (another process recorded it; this process's control is older): two items, neither
    # of them b. The stale index 2 is the end of this history: the block must not follow the newest message.
    compacted = [msg("summary of a and b", "assistant"), msg("d")]
    assert steering.with_pins(compacted, BLOCK, placed) == [BLOCK, *compacted]
    # The user edited history since: index 2 is inside it, after another item than b.
    edited = [a, msg("b, edited", "assistant"), msg("e"), msg("f", "assistant")]
    assert steering.with_pins(edited, BLOCK, placed) == [BLOCK, *edited]
    # A block recorded first has no item before it.
    assert steering.with_pins([a, c], BLOCK, [(0, BLOCK, None)]) == [BLOCK, a, c]


def test_steered_keeps_the_base_instructions_first_and_says_when_nothing_changes():
    items = [BASE, msg("a")]
    assert steering.steered(items, has_instructions=False, rules=[], block=BLOCK) == [BASE, BLOCK, msg("a")]
    assert steering.steered(items, has_instructions=False, rules=[], block=None) is None


def test_after_a_rollback_with_a_pin_in_force_the_upstream_gets_the_pinned_block_once():
    """Support rolled back a compaction while a pin was in force: the rule's prefix (the history after the
    compaction) ends in the pinned block, and Codex sends that block back after it; the history before the
    compaction (the replacement) holds the block too. Forwarded: the replacement and what follows, one block."""
    a, summary, reply = msg("fix bug 3"), msg("summary of bug 3", "assistant"), msg("done", "assistant")
    before = [a, msg("long tool output", "assistant"), BLOCK]
    rule = {"kind": "rollback", "prefix": [a, summary, BLOCK], "replacement": before}
    forwarded = steering.substituted([a, summary, BLOCK, reply, msg("next")], [rule])
    assert forwarded == [*before, reply, msg("next")]
    assert sum(1 for item in forwarded if item == BLOCK) == 1
