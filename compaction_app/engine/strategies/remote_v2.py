"""Remote v2: streamed `/responses` ending with a `compaction_trigger` (`implementation =
responses_compaction_v2`, spec §4.3, §5.4)."""

from __future__ import annotations

from compaction_app.engine.errors import CompactionError, EngineErrorKind
from compaction_app.engine.events import StreamError
from compaction_app.engine.history import (
    Injection,
    build_v2_retained_history,
    filter_compacted_output,
    inject_initial_context,
)
from compaction_app.engine.items import Item
from compaction_app.engine.port import ResponsesRequest, Usage
from compaction_app.engine.prompts import (
    V2_STREAM_CLOSED_MESSAGE,
    reconnecting_message,
    v2_wrong_compaction_count_message,
)
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.strategies.base import StrategyContext, StrategyResult, backoff
from compaction_app.engine.strategies.remote_common import check_compaction_item, prepare_remote_input

MAX_REMOTE_COMPACTION_V2_STREAM_RETRIES = 2
COMPACTION_TRIGGER: Item = {"type": "compaction_trigger"}


async def collect_compaction_output(ctx: StrategyContext, request: ResponsesRequest) -> tuple[Item, Usage | None]:
    """Count output items, keep the first `compaction` one, stop at `response.completed` (spec §4.3 step 4).
    Early end → retryable stream error; a compaction count other than one → fatal error."""
    assert ctx.client is not None
    output_count = 0
    compaction_count = 0
    compaction: Item | None = None
    completed = False
    usage: Usage | None = None
    try:
        async for event in ctx.client.stream_response(request):
            if event.type == "response.output_item.done" and event.item is not None:
                output_count += 1
                if event.item.get("type") in ("compaction", "compaction_summary"):
                    compaction_count += 1
                    if compaction is None:
                        compaction = event.item
            elif event.type == "response.completed":
                completed = True
                usage = event.usage
                break
    except ProviderError as err:
        if err.kind != ErrorKind.STREAM_CLOSED:
            raise
        # The client's generic "stream closed" becomes the v2 wording (spec §4.3 step 4); still retryable.
        raise ProviderError(kind=ErrorKind.STREAM_CLOSED, message=V2_STREAM_CLOSED_MESSAGE,
                            http_status=err.http_status) from err
    if not completed:
        raise ProviderError(kind=ErrorKind.STREAM_CLOSED, message=V2_STREAM_CLOSED_MESSAGE)
    if compaction_count != 1 or compaction is None:
        raise CompactionError(
            kind=EngineErrorKind.FATAL.value,
            message=v2_wrong_compaction_count_message(compaction_count, output_count),
        )
    return check_compaction_item(compaction), usage


async def run_remote_v2(ctx: StrategyContext) -> StrategyResult:
    """spec §4.3: trim and normalise, send `prompt_input + [compaction_trigger]` with tools and base instructions,
    retry retryable errors at most min(stream_max_retries, 2) times (first retry immediate), then retain user
    messages of the request input within 64k tokens plus the compaction item (§5.4), filter (§5.2) and inject."""
    s = ctx.settings
    prepared = prepare_remote_input(ctx)
    request = ResponsesRequest(
        model=s.model,
        input=[*prepared.prompt_input, dict(COMPACTION_TRIGGER)],
        instructions=s.base_instructions,
        tools=list(s.tools),
        parallel_tool_calls=s.parallel_tool_calls,
        reasoning=s.reasoning,
        prompt_cache_key=s.prompt_cache_key,
        client_metadata=s.client_metadata(ctx.window_number),
    )
    max_retries = min(s.stream_max_retries, MAX_REMOTE_COMPACTION_V2_STREAM_RETRIES)
    retries = 0
    while True:
        try:
            compaction, usage = await collect_compaction_output(ctx, request)
            break
        except ProviderError as err:
            if not err.retryable or retries >= max_retries:
                failure = CompactionError.from_provider(err)
                failure.retries = retries
                raise failure from err
            retries += 1
            if retries == 1:
                delay = err.retry_after or 0.0
            else:
                delay = err.retry_after if err.retry_after is not None else backoff(retries, ctx.jitter())
            ctx.emit(StreamError(message=reconnecting_message(retries, max_retries),
                                 codex_error_info=str(err.kind), additional_details=err.message))
            await ctx.sleep(delay)
        except CompactionError as err:
            err.retries = retries
            raise

    retained, images = build_v2_retained_history(
        prepared.prompt_input, compaction, max_tokens=s.retained_message_budget
    )
    new_history = inject_initial_context(filter_compacted_output(retained), ctx.initial_context, ctx.injection)
    tokens_before = prepared.tokens_before
    summary_tokens = cached = None
    if usage is not None:
        tokens_before = usage.input_tokens
        summary_tokens = usage.output_tokens
        cached = usage.cached_input_tokens
    return StrategyResult(
        replacement_history=new_history,
        message="",
        output_items=[compaction],
        retries=retries,
        tokens_before=tokens_before,
        compaction_summary_tokens=summary_tokens,
        cached_input_tokens=cached,
        retained_image_count=images,
        reference_context_set=ctx.injection is Injection.BEFORE_LAST_USER_MESSAGE,
        rewritten_outputs=prepared.rewritten_outputs,
        call_tokens=usage.total_tokens if usage is not None else 0,
        call_input_tokens=usage.input_tokens if usage is not None else 0,
        call_output_tokens=usage.output_tokens if usage is not None else 0,
    )
