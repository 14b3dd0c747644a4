"""What the gateway changes in a request before the upstream sees it, on behalf of an operator (issue 29).

Codex keeps its own history and sends it whole with every request; compactweb cannot change what Codex holds. So
an operator's decision is a rule the gateway applies to each request of that Codex session:

- a substitution puts a replacement in place of a prefix of Codex's history: a compaction the gateway ran at
  the next request (the prefix: the history it compacted; the replacement: what the policy's compaction left)
  or support's rollback of a compaction (the prefix: the history after it; the replacement: the history before
  it). Substitutions apply oldest first, each to what the ones before it left; one whose prefix Codex no longer
  sends (Codex compacted since) changes nothing.
- pins: the pinned blocks (developer messages, compaction_app.engine.pins) that pinning and unpinning put in the
  session's recorded history are put back where they are, request after request, so the upstream sees them and
  the recorded history still grows by extension; after Codex compacted (its history no longer reaches those
  places) the block in force goes first, right after the base instructions.

Plain functions over items; the prefixes are compared without wire-only fields and without pinned blocks (a
block the gateway put in is not Codex's).
"""

from __future__ import annotations

from typing import Any

from compaction_app.engine.pins import is_pinned_block
from gateway_app import wire

Item = dict[str, Any]
MAX_SUBSTITUTIONS = 8  # older ones no longer match what Codex sends: a session keeps its newest


def split_input(items: list[Item], *, has_instructions: bool) -> tuple[list[Item], list[Item]]:
    """(the base instructions item, if it leads the input, and the history after it)."""
    if not has_instructions and items and items[0].get("type") == "message" and items[0].get("role") == "developer" \
            and not is_pinned_block(items[0]):
        return items[:1], items[1:]
    return [], items


def _same(a: Item, b: Item) -> bool:
    return a is b or a == b or wire.wire_form(a) == wire.wire_form(b)


def matched_prefix(prefix: list[Item], history: list[Item]) -> int | None:
    """How many leading items of `history` make up `prefix` (pinned blocks skipped on both sides), or None. A
    prefix that ends in pinned blocks takes as many that follow in `history` too: they are the prefix's, and left
    behind they would reach the upstream twice (once in the replacement, once after it)."""
    i = 0
    for want in prefix:
        if is_pinned_block(want):
            continue
        while i < len(history) and is_pinned_block(history[i]):
            i += 1
        if i >= len(history) or not _same(want, history[i]):
            return None
        i += 1
    trailing = next((n for n, item in enumerate(reversed(prefix)) if not is_pinned_block(item)), len(prefix))
    while trailing and i < len(history) and is_pinned_block(history[i]):
        i, trailing = i + 1, trailing - 1
    return i


def substituted(history: list[Item], rules: list[dict[str, Any]]) -> list[Item]:
    for rule in rules:
        end = matched_prefix(rule["prefix"], history)
        if end is not None and rule["prefix"]:
            history = [*rule["replacement"], *history[end:]]
    return history


def _not_there(out: list[Item], index: int, before: Item | None) -> bool:
    """Whether `index` of `out` is not the place a block was recorded at: past the end, taken by a pinned block,
    or (the control it comes from is read through a per-process cache, so it can be seconds old and another
    process may have changed the recorded history since) not after the item the record has before it."""
    if index > len(out) or any(is_pinned_block(i) for i in out[index:index + 1]):
        return True
    return before is not None and (index == 0 or not _same(out[index - 1], before))


def with_pins(history: list[Item], block: Item | None, placed: list[tuple] = ()) -> list[Item]:
    """The history with the pins kept: the pinned blocks the recorded history holds (`placed`, (index, block,
    the recorded item before it or None)), each put back where it is, so the history still extends what was
    recorded; when Codex's history no longer reaches one of those places (Codex compacted since, or the record
    changed since the control was read) or holds none, the block in force (`block`) right after the base
    instructions, unless the history holds a pinned block already."""
    out = history
    for index, item, *before in placed:
        if index < len(out) and _same(out[index], item):
            continue
        if _not_there(out, index, before[0] if before else None):
            out = history  # not where it was recorded: start again from the block in force
            break
        out = [*out[:index], item, *out[index:]]
    else:
        if placed:
            return out
    if block is None or any(is_pinned_block(i) for i in out):
        return out
    return [block, *out]


def steered(items: list[Item], *, has_instructions: bool, rules: list[dict[str, Any]], block: Item | None,
            placed: list[tuple[int, Item]] = ()) -> list[Item] | None:
    """The input to forward (base instructions kept first), or None when the rules and pins change nothing."""
    if not rules and block is None and not placed:
        return None
    base, history = split_input(items, has_instructions=has_instructions)
    changed = with_pins(substituted(history, rules), block, placed)
    if changed is history:
        return None
    return [*base, *changed]


def with_rule(rules: list[dict[str, Any]], rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [*rules, rule][-MAX_SUBSTITUTIONS:]
