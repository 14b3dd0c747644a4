"""Local summarization (`implementation = responses`, spec §4.1, §6.1, §6.2)."""

from __future__ import annotations

from compaction_app.engine.errors import CompactionError
from compaction_app.engine.events import Error, RawResponseItem, StreamError, TokenCount
from compaction_app.engine.history import (
    Injection,
    build_compacted_history,
    collect_user_messages,
    inject_initial_context,
    last_assistant_text,
    normalize_for_request,
    remove_oldest_item,
)
from compaction_app.engine.items import SUMMARY_PREFIX, Item, user_message
from compaction_app.engine.port import ResponsesRequest, Usage
from compaction_app.engine.prompts import (
    CONTEXT_WINDOW_EXCEEDED_MESSAGE,
    LOCAL_STREAM_CLOSED_MESSAGE,
    SUMMARIZATION_PROMPT,
    reconnecting_message,
)
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.strategies.base import StrategyContext, StrategyResult, backoff


def compaction_prompt(compact_prompt: str | None, extra_instructions: str | None) -> str:
    """The prompt appended to the working copy: `compact_prompt` else SUMMARIZATION_PROMPT (spec §4.1 step 2),
    followed by the operator's extra instructions of a manual compaction (a compactweb addition)."""
    prompt = compact_prompt if compact_prompt else SUMMARIZATION_PROMPT
    if extra_instructions and extra_instructions.strip():
        prompt = f"{prompt.rstrip()}\n\n{extra_instructions.strip()}"
    return prompt


def build_request(ctx: StrategyContext, working: list[Item]) -> ResponsesRequest:
    """spec §4.1 step 3: a normal streamed request with no tools, the session's base instructions and the
    normalised working copy (the prompt last)."""
    s = ctx.settings
    return ResponsesRequest(
        model=s.model,
        input=normalize_for_request(working, supports_images=s.supports_images),
        instructions=s.base_instructions,
        tools=[],
        parallel_tool_calls=False,
        reasoning=s.reasoning,
        prompt_cache_key=s.prompt_cache_key,
        client_metadata=s.client_metadata(ctx.window_number),
    )


async def drain_to_completed(ctx: StrategyContext, request: ResponsesRequest) -> tuple[list[Item], Usage | None]:
    """Collect finished output items until `response.completed` (spec §4.1 step 4). A stream that ends early is
    a retryable `stream closed before response.completed`."""
    assert ctx.client is not None
    items: list[Item] = []
    async for event in ctx.client.stream_response(request):
        if event.type == "response.output_item.done" and event.item is not None:
            items.append(event.item)
            ctx.emit(RawResponseItem(item=event.item))
        elif event.type == "response.completed":
            usage = event.usage
            if usage is not None:
                ctx.emit(TokenCount(
                    total_tokens=usage.total_tokens, input_tokens=usage.input_tokens,
                    cached_input_tokens=usage.cached_input_tokens, output_tokens=usage.output_tokens,
                    model_context_window=ctx.settings.usable_window, source="server",
                ))
            return items, usage
    raise ProviderError(kind=ErrorKind.STREAM_CLOSED, message=LOCAL_STREAM_CLOSED_MESSAGE)


async def run_local(ctx: StrategyContext) -> StrategyResult:
    """spec §4.1: summarise a working copy with the prompt appended; on success the replacement history is the
    kept real user messages (20k budget) plus `SUMMARY_PREFIX + "\\n" + summary`, with initial context injected
    per the mode. Context-window-exceeded drops the oldest item (and its partner) and retries; other errors retry
    with backoff up to `stream_max_retries`."""
    s = ctx.settings
    working = [*ctx.items, user_message(compaction_prompt(s.compact_prompt, ctx.extra_instructions))]
    max_retries = s.stream_max_retries
    retries = 0
    total_retries = 0
    trimmed = 0
    while True:
        request = build_request(ctx, working)
        try:
            output_items, usage = await drain_to_completed(ctx, request)
            break
        except ProviderError as err:
            if err.kind == ErrorKind.CONTEXT_WINDOW_EXCEEDED:
                if len(request.input) > 1:
                    # Drop the prefix, keep the cache-friendly suffix; the prompt is last so it survives.
                    working = remove_oldest_item(working)
                    trimmed += 1
                    retries = 0
                    continue
                full = s.usable_window or 0
                ctx.emit(TokenCount(total_tokens=full, model_context_window=s.usable_window, source="full"))
                ctx.emit(Error(message=CONTEXT_WINDOW_EXCEEDED_MESSAGE,
                               codex_error_info=ErrorKind.CONTEXT_WINDOW_EXCEEDED.value,
                               http_status=err.http_status))
                failure = CompactionError.from_provider(err, CONTEXT_WINDOW_EXCEEDED_MESSAGE)
                failure.retries = total_retries
                failure.active_tokens_after = full
                raise failure from err
            if retries < max_retries:
                retries += 1
                total_retries += 1
                ctx.emit(StreamError(message=reconnecting_message(retries, max_retries),
                                     codex_error_info=str(err.kind), additional_details=err.message))
                await ctx.sleep(backoff(retries, ctx.jitter()))
                continue
            ctx.emit(Error(message=err.message, codex_error_info=str(err.kind), http_status=err.http_status))
            failure = CompactionError.from_provider(err)
            failure.retries = total_retries
            raise failure from err

    # The summariser's output is not installed into the live history (docs/compaction.md), so the "newest
    # assistant message of the whole history" is looked up in this attempt's output first, then in the history.
    suffix = last_assistant_text(output_items)
    if suffix is None:
        suffix = last_assistant_text(ctx.items) or ""
    summary_text = f"{SUMMARY_PREFIX}\n{suffix}"
    new_history = build_compacted_history(
        [], collect_user_messages(ctx.items), summary_text, max_tokens=s.user_message_budget
    )
    new_history = inject_initial_context(new_history, ctx.initial_context, ctx.injection)
    return StrategyResult(
        replacement_history=new_history,
        message=summary_text,
        summary_text=suffix,
        output_items=output_items,
        retries=total_retries,
        # The summariser's output tokens (Codex fills this for v2 only; the attempts table shows it for both).
        compaction_summary_tokens=usage.output_tokens if usage is not None else None,
        reference_context_set=ctx.injection is Injection.BEFORE_LAST_USER_MESSAGE,
        trimmed_items=trimmed,
        call_tokens=usage.total_tokens if usage is not None else 0,
        call_input_tokens=usage.input_tokens if usage is not None else 0,
        call_output_tokens=usage.output_tokens if usage is not None else 0,
        prompt=s.compact_prompt or SUMMARIZATION_PROMPT,
    )
