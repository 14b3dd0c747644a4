"""Remote v1: `POST /responses/compact` (`implementation = responses_compact`, spec §4.2)."""

from __future__ import annotations

from compaction_app.engine.errors import CompactionError, EngineErrorKind
from compaction_app.engine.history import Injection, filter_compacted_output, inject_initial_context
from compaction_app.engine.port import CompactRequest
from compaction_app.engine.provider_errors import ProviderError
from compaction_app.engine.strategies.base import StrategyContext, StrategyResult
from compaction_app.engine.strategies.remote_common import (
    check_compaction_item,
    prepare_remote_input,
    serde_type,
)


def check_output(output: object) -> list[dict]:
    """The response's `output` must be an array of item objects; anything else is a parse error whose text follows
    serde's (`invalid type: string "…", expected a sequence`) (spec §4.2 step 5). Not retried."""
    if not isinstance(output, list):
        raise CompactionError(
            kind=EngineErrorKind.BAD_RESPONSE.value,
            message=f"invalid type: {serde_type(output)}, expected a sequence",
        )
    for item in output:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise CompactionError(
                kind=EngineErrorKind.BAD_RESPONSE.value,
                message=f"invalid type: {serde_type(item)}, expected a response item",
            )
        check_compaction_item(item)
    return output


async def run_remote_v1(ctx: StrategyContext) -> StrategyResult:
    """spec §4.2: trim outputs, send the normalised history with tools and base instructions (no prompt) to
    `/responses/compact`, keep the output per §5.2 and inject initial context per §5.3. HTTP retries are the
    provider client's (`request_max_retries`); there is no stream retry loop here."""
    assert ctx.client is not None
    s = ctx.settings
    prepared = prepare_remote_input(ctx)
    request = CompactRequest(
        model=s.model,
        input=prepared.prompt_input,
        instructions=s.base_instructions,
        tools=list(s.tools),
        parallel_tool_calls=s.parallel_tool_calls,
        reasoning=s.reasoning,
        prompt_cache_key=s.prompt_cache_key,
    )
    try:
        response = await ctx.client.compact(request)
    except ProviderError as err:
        raise CompactionError.from_provider(err) from err
    output = check_output(response.output)
    new_history = inject_initial_context(filter_compacted_output(output), ctx.initial_context, ctx.injection)
    return StrategyResult(
        replacement_history=new_history,
        message="",
        output_items=list(output),
        tokens_before=prepared.tokens_before,
        compaction_summary_tokens=response.usage.output_tokens if response.usage is not None else None,
        reference_context_set=ctx.injection is Injection.BEFORE_LAST_USER_MESSAGE,
        rewritten_outputs=prepared.rewritten_outputs,
        call_tokens=response.usage.total_tokens if response.usage is not None else 0,
        call_input_tokens=response.usage.input_tokens if response.usage is not None else 0,
        call_output_tokens=response.usage.output_tokens if response.usage is not None else 0,
    )
