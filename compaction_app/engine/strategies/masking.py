"""Observation masking (a compactweb method, not in Codex): replace old tool outputs with short placeholders.

After JetBrains' "The Complexity Trap" (2025): keeping the agent's reasoning and actions but masking tool
observations older than a recency window halves cost and matches LLM summarisation. Here:

1. every tool output older than the window (the last `keep_turns` user turns, or, when `keep_tokens` is set, the
   newest outputs whose tokens fit in it) becomes a placeholder that keeps its `call_id` (so call/output pairing and
   request validity hold) and says what was there and how to get it back;
2. when that is not enough (the history is still above `target_percent` of the auto-compact limit), either more
   outputs are masked, oldest first, down to the newest one (plain masking), or (the hybrid, `summarise_when_short`)
   the masked history is summarised locally, so the model call sees far fewer tokens;
3. no model call at all in the plain method; a masking that frees nothing fails (`nothing_to_mask`) and changes
   nothing, rather than installing an identical window that would compact again at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from compaction_app.engine.errors import CompactionError
from compaction_app.engine.items import TOOL_CALL_KINDS, TOOL_OUTPUT_KINDS, Item, is_real_user_message
from compaction_app.engine.strategies.base import StrategyContext, StrategyResult
from compaction_app.engine.strategies.local import run_local

MASKED_MARKER = "[output masked by compactweb"
NOTHING_TO_MASK = "nothing_to_mask"
DEFAULT_KEEP_TURNS = 2
DEFAULT_TARGET_PERCENT = 50
# Outputs this small are cheaper to keep than to replace by a placeholder.
MIN_MASKED_TOKENS = 40


@dataclass(frozen=True)
class MaskingOptions:
    keep_turns: int = DEFAULT_KEEP_TURNS
    keep_tokens: int | None = None
    target_percent: int = DEFAULT_TARGET_PERCENT
    summarise_when_short: bool = False

    def __post_init__(self) -> None:
        if self.keep_turns < 0 or (self.keep_tokens is not None and self.keep_tokens < 0):
            raise ValueError("the masking window must be >= 0")
        if not 1 <= self.target_percent <= 100:
            raise ValueError("target_percent must be between 1 and 100")


def placeholder(item: Item, tokens: int, tool: str) -> Item:
    """The masked form of one tool output: same type and call_id, a one-line body."""
    text = (f"{MASKED_MARKER}: {tokens} tokens of `{tool}` output from an earlier turn were removed to save "
            "context; run the call again if you need them]")
    masked = {"type": item.get("type"), "call_id": item.get("call_id"), "output": text}
    if item.get("type") == "tool_search_output":
        masked = {**item, "tools": []}
    return masked


def is_masked(item: Item) -> bool:
    output = item.get("output")
    return item.get("type") in TOOL_OUTPUT_KINDS and isinstance(output, str) and output.startswith(MASKED_MARKER)


def _recent_start(items: list[Item], keep_turns: int) -> int:
    """Index of the first item of the last `keep_turns` user turns (len(items) when keep_turns is 0)."""
    if keep_turns == 0:
        return len(items)
    seen = 0
    for index in range(len(items) - 1, -1, -1):
        if is_real_user_message(items[index]):
            seen += 1
            if seen == keep_turns:
                return index
    return 0


def mask_plan(items: list[Item], tokens: list[int], options: MaskingOptions) -> list[int]:
    """Indexes of the outputs outside the recency window, oldest first."""
    candidates = [i for i, item in enumerate(items)
                  if item.get("type") in TOOL_OUTPUT_KINDS and not is_masked(item) and tokens[i] > MIN_MASKED_TOKENS]
    if options.keep_tokens is not None:
        kept, budget = set(), options.keep_tokens
        for i in reversed(candidates):
            if tokens[i] > budget:
                break
            kept.add(i)
            budget -= tokens[i]
        return [i for i in candidates if i not in kept]
    start = _recent_start(items, options.keep_turns)
    return [i for i in candidates if i < start]


def apply_masks(ctx: StrategyContext, indexes: list[int], tokens: list[int]) -> tuple[list[Item], list[int]]:
    names = {i.get("call_id"): str(i.get("name", i.get("type"))) for i in ctx.items if i.get("type") in TOOL_CALL_KINDS}
    items, counts = list(ctx.items), list(tokens)
    for i in indexes:
        items[i] = placeholder(items[i], tokens[i], names.get(items[i].get("call_id"), "tool"))
        counts[i] = ctx.counter.count_item(items[i])
    return items, counts


def target_tokens(ctx: StrategyContext, options: MaskingOptions) -> int | None:
    limit = ctx.settings.auto_compact_limit or ctx.settings.usable_window
    return None if limit is None else limit * options.target_percent // 100


async def run_masking(ctx: StrategyContext, options: MaskingOptions | None = None) -> StrategyResult:
    options = options or MaskingOptions()
    tokens = ctx.item_token_list()
    plan = mask_plan(ctx.items, tokens, options)
    items, counts = apply_masks(ctx, plan, tokens)
    target = target_tokens(ctx, options)
    short = target is not None and sum(counts) > target
    if short and options.summarise_when_short:
        # The hybrid: summarise what masking left, a much smaller request than the raw history.
        result = await run_local(replace(ctx, items=items, item_tokens=counts))
        result.rewritten_outputs = len(plan)
        return result
    if short:
        assert target is not None
        outputs = [i for i, item in enumerate(items) if item.get("type") in TOOL_OUTPUT_KINDS]
        newest = outputs[-1] if outputs else None
        total = sum(counts)
        extra = []
        for i in mask_plan(items, counts, MaskingOptions(keep_turns=0)):
            if total <= target:
                break
            if i == newest:  # the model is about to read it
                continue
            total -= counts[i] - ctx.counter.count_item(placeholder(items[i], counts[i], "tool"))
            extra.append(i)
        if extra:
            items, counts = apply_masks(replace(ctx, items=items), extra, counts)
            plan = sorted(plan + extra)
    if not plan:
        raise CompactionError(kind=NOTHING_TO_MASK,
                              message="observation masking found no tool output outside the recency window to mask")
    return StrategyResult(replacement_history=items, message="", rewritten_outputs=len(plan))
