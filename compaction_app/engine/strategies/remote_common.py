"""Steps shared by remote v1 and v2: output trimming before the call (spec §6.3), the analytics adjustment, and
the shape checks on what the server returns."""

from __future__ import annotations

import json
from dataclasses import dataclass

from compaction_app.engine.errors import CompactionError, EngineErrorKind
from compaction_app.engine.history import normalize_for_request, trim_outputs_to_fit
from compaction_app.engine.items import COMPACTION_KINDS, Item
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


def serde_type(value: object) -> str:
    """How serde names a JSON value in its `invalid type` errors, which Codex surfaces verbatim (spec §4.2 step 5);
    used for the engine's checks of compacted items and the provider client's check of the body alike. A string is
    cut at 60 characters: the message is stored with the attempt."""
    if isinstance(value, str):
        return f"string {json.dumps(value)[:60]}"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"integer `{value}`" if isinstance(value, int) else f"floating point `{value}`"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "sequence"
    return type(value).__name__


def check_compaction_item(item: Item) -> Item:
    """A server compaction item must carry a string `encrypted_content` (optional only on the legacy
    `context_compaction`), as Codex's typed parse requires (spec §1.1); anything else is a bad response."""
    if item.get("type") not in (*COMPACTION_KINDS, "compaction_summary"):
        return item
    content = item.get("encrypted_content")
    if content is None and item.get("type") == "context_compaction":
        return item
    if not isinstance(content, str):
        raise CompactionError(
            kind=EngineErrorKind.BAD_RESPONSE.value,
            message=f"invalid type: {serde_type(content)}, expected a string (encrypted_content of a compaction item)",
        )
    return item
