"""Steps shared by remote v1 and v2: output trimming before the call (spec §6.3) and the analytics adjustment."""

from __future__ import annotations

from dataclasses import dataclass

from compaction_app.engine.history import normalize_for_request, trim_outputs_to_fit
from compaction_app.engine.items import Item
from compaction_app.engine.strategies.base import StrategyContext


@dataclass(frozen=True)
class PreparedInput:
    prompt_input: list[Item]
    rewritten_outputs: int
    tokens_before: int | None


def prepare_remote_input(ctx: StrategyContext) -> PreparedInput:
    """Trim tool outputs so the estimate fits the usable window, then normalise (spec §4.2 steps 2-3, §4.3 step
    2). The deleted tokens, capped by the tokens added since the last model-generated item, are subtracted from
    the analytics `active_context_tokens_before` (spec §6.3)."""
    s = ctx.settings
    tokens = ctx.item_token_list()
    trim = trim_outputs_to_fit(
        ctx.items,
        s.usable_window,
        base_instructions=s.base_instructions,
        count_item=ctx.counter.count_item,
        count_text=ctx.counter.count_text,
        item_tokens=tokens,
    )
    tokens_before = None
    if trim.estimated_deleted_tokens > 0:
        cap = ctx.tokens_after_last_model_item(tokens)
        tokens_before = max(0, ctx.active_tokens - min(trim.estimated_deleted_tokens, cap))
    prompt_input = normalize_for_request(trim.items, supports_images=s.supports_images)
    return PreparedInput(prompt_input, trim.rewritten_outputs, tokens_before)
