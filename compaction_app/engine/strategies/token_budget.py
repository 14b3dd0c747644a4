"""Token budget / new context window (spec §4.4): no model call; the replacement history is the initial context."""

from __future__ import annotations

from compaction_app.engine.strategies.base import StrategyContext, StrategyResult


async def run_token_budget(ctx: StrategyContext) -> StrategyResult:
    """spec §4.4 step 3: every user/assistant/tool item is dropped and the replacement history is only the full
    initial context; the TurnContext baseline is installed (no re-injection next turn) and the prefill cleared."""
    return StrategyResult(
        replacement_history=list(ctx.initial_context),
        message="",
        reference_context_set=True,
    )
