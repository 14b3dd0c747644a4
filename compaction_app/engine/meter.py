"""The current window's active-token meter, kept incrementally so reading it is O(1) (spec §3.2, §3.4).

Codex computes the active total on demand by scanning the history:

    active = last server usage total
           + Σ counts of the items after the last model-generated item
           + Σ counts of encrypted reasoning items before the last user message  (unless the server said the
                                                                                  reasoning is already included)

This module keeps the three sums as running numbers updated once per appended item, so a threshold check never
walks the history. Plain data in, plain data out: the Django side stores a `MeterState` in O(1) columns.

One deliberate difference, documented in docs: when the window holds no model-generated item yet, Codex adds nothing
for "items after the last model-generated item" (its slice is empty). We count the items appended since the last
recompute instead. The recompute's estimate already covers everything before them, so no item is counted twice, and
a session fed through the API without model output still shows its growth. Once the model has produced an item the
two rules agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from compaction_app.engine.evolve import evolve
from compaction_app.engine.items import Item, is_model_generated, is_user_turn_boundary

PREFILL_SERVER = "server"
PREFILL_ESTIMATED = "estimated"


@dataclass(frozen=True)
class ItemFlags:
    """What the meter needs to know about one item besides its token count."""

    model_generated: bool
    user_message: bool
    encrypted_reasoning: bool


def item_flags(item: Item) -> ItemFlags:
    """Classify an item for the meter (spec §3.2).

    "Last user message" is the last user-turn boundary, as current Codex anchors the reasoning rule: a user
    message that is not contextual (injected context, legacy warnings and hook prompts do not move it);
    "encrypted reasoning" is a reasoning item carrying `encrypted_content` (the only kind Codex adds there).
    """
    return ItemFlags(
        model_generated=is_model_generated(item),
        user_message=is_user_turn_boundary(item),
        encrypted_reasoning=item.get("type") == "reasoning" and bool(item.get("encrypted_content")),
    )


@dataclass(frozen=True)
class MeterState:
    """Running sums behind the active total. Every field is an int, a bool or None so it fits a table row.

    - usage_total: the last server usage `total_tokens`, or the last recompute's estimate (spec §3.2).
    - since_model: counts of items appended after the last model-generated item (or the last recompute).
    - reasoning_before_user: counts of encrypted reasoning items located before the last user message.
    - reasoning_after_user: counts of encrypted reasoning items after the last user message (they move into
      reasoning_before_user when a user message arrives).
    - reasoning_included: the last response said the server already counted reasoning (X-Reasoning-Included).
    - history_tokens: Σ counts of every item in the window's history (the estimate a recompute installs).
    - base_tokens: count of the base instructions (part of every recompute's estimate, spec §3.1).
    - prefill / prefill_source: the window prefill of spec §3.4 (None until known).
    """

    usage_total: int = 0
    since_model: int = 0
    reasoning_before_user: int = 0
    reasoning_after_user: int = 0
    reasoning_included: bool = False
    history_tokens: int = 0
    base_tokens: int = 0
    prefill: int | None = None
    prefill_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def active_total(state: MeterState) -> int:
    """The window's active context tokens, O(1) (spec §3.2 `get_total_token_usage`)."""
    reasoning = 0 if state.reasoning_included else state.reasoning_before_user
    return state.usage_total + state.since_model + reasoning


def item_appended(state: MeterState, tokens: int, flags: ItemFlags) -> MeterState:
    """Account for one item appended to the history (spec §3.2), in O(1)."""
    since_model = 0 if flags.model_generated else state.since_model + tokens
    before, after = state.reasoning_before_user, state.reasoning_after_user
    if flags.user_message:
        before, after = before + after, 0
    if flags.encrypted_reasoning:
        after += tokens
    return evolve(
        state,
        since_model=since_model,
        reasoning_before_user=before,
        reasoning_after_user=after,
        history_tokens=state.history_tokens + tokens,
    )


def usage_observed(
    state: MeterState, *, total_tokens: int, input_tokens: int = 0, reasoning_included: bool = False
) -> MeterState:
    """A model response reported usage (spec §3.2): it becomes the base of the total.

    The first server `input_tokens` of a window becomes its prefill and stays (spec §3.4); an estimated prefill
    is replaced by it.
    """
    prefill, source = state.prefill, state.prefill_source
    if source != PREFILL_SERVER and input_tokens > 0:
        prefill, source = input_tokens, PREFILL_SERVER
    return evolve(
        state,
        usage_total=max(0, total_tokens),
        reasoning_included=reasoning_included,
        prefill=prefill,
        prefill_source=source,
    )


def recomputed(state: MeterState) -> MeterState:
    """Codex's `recompute_token_usage` (spec §3.2): the base becomes the estimate of the whole history.

    Items appended before now are inside the estimate, so they leave `since_model`. A server prefill stays; an
    unknown or estimated one becomes the estimate (spec §3.4).
    """
    estimate = state.base_tokens + state.history_tokens
    prefill, source = state.prefill, state.prefill_source
    if source != PREFILL_SERVER:
        prefill, source = estimate, PREFILL_ESTIMATED
    return evolve(
        state, usage_total=estimate, since_model=0, reasoning_included=False, prefill=prefill, prefill_source=source
    )


def history_replaced(
    state: MeterState, entries: Iterable[tuple[int, ItemFlags]], *, base_tokens: int | None = None
) -> MeterState:
    """The history was replaced (compaction, rollback, session start): rebuild the sums from the new items only.

    O(n) in the replacement, not the old history. Replacing history clears the prefill (spec §3.4), then the
    recompute of spec §3.2 installs the estimate of the new history.
    """
    history = before = after = 0
    for tokens, flags in entries:
        history += tokens
        if flags.user_message:
            before, after = before + after, 0
        if flags.encrypted_reasoning:
            after += tokens
    state = MeterState(
        reasoning_before_user=before,
        reasoning_after_user=after,
        history_tokens=history,
        base_tokens=state.base_tokens if base_tokens is None else base_tokens,
    )
    return recomputed(state)


def pinned_full(state: MeterState, *, usable_window: int) -> MeterState:
    """Context window exceeded: Codex pins the last usage to the usable window (`set_total_tokens_full`, §3.2)."""
    return evolve(state, usage_total=usable_window)


def prefill_cleared(state: MeterState) -> MeterState:
    """A new window started without replacing history (token budget, spec §3.4, §9)."""
    return evolve(state, prefill=None, prefill_source="")


def meter_from_items(items: Iterable[Item], counts: Iterable[int], *, base_tokens: int = 0) -> MeterState:
    """A meter recomputed over a full item list (what a compaction installs)."""
    return history_replaced(
        MeterState(), ((t, item_flags(i)) for i, t in zip(items, counts, strict=True)), base_tokens=base_tokens
    )
