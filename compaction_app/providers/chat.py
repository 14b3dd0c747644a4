"""A ModelClient for OpenAI-compatible servers that only speak chat completions (issue 3).

Requests are converted to `POST {base}/chat/completions` with `stream: true` and `stream_options.include_usage`;
the chunk stream is converted back into the Responses events the engine understands: text deltas, then one
`response.output_item.done` for the assistant message and one per tool call (as `function_call` items), then
`response.completed` with the server's usage, or an estimate when the server sends none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from compaction_app.engine.port import CompactRequest, CompactResponse, ResponsesRequest, StreamEvent, Usage
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.tokens import approx_token_count
from compaction_app.providers.chat_format import assistant_message, items_to_messages, tools_to_chat
from compaction_app.providers.classify import error_from_event
from compaction_app.providers.client import STREAM_CLOSED_MESSAGE
from compaction_app.providers.connection import ConnectedClient
from compaction_app.providers.sse import aiter_sse

logger = logging.getLogger(__name__)


def chat_body(request: ResponsesRequest) -> dict[str, Any]:
    """The chat-completions body for a Responses request."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": items_to_messages(request.input, request.instructions),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tools = tools_to_chat(request.tools)
    if tools:
        body["tools"] = tools
        body["tool_choice"] = request.tool_choice
        body["parallel_tool_calls"] = request.parallel_tool_calls
    return body


def _chat_usage(data: dict[str, Any]) -> Usage:
    details = data.get("prompt_tokens_details") or {}
    return Usage.from_json(
        {
            "input_tokens": data.get("prompt_tokens", 0),
            "output_tokens": data.get("completion_tokens", 0),
            "total_tokens": data.get("total_tokens"),
            "cached_input_tokens": details.get("cached_tokens", 0),
        }
    )


class ChatClient(ConnectedClient):
    """Chat-completions adapter with the ModelClient interface; it has no remote compaction."""

    def _no_remote_compaction(self) -> ProviderError:
        return ProviderError(
            kind=ErrorKind.NOT_FOUND,
            message=(
                f"provider {self.config.name!r} speaks chat completions, which has no remote compaction "
                "(/responses/compact or compaction_trigger); use local summarization"
            ),
        )

    async def compact(self, request: CompactRequest) -> CompactResponse:
        raise self._no_remote_compaction()

    async def stream_response(self, request: ResponsesRequest) -> AsyncIterator[StreamEvent]:
        """Stream a chat completion as Responses events; ends with `response.completed` or raises ProviderError."""
        if any(item.get("type") == "compaction_trigger" for item in request.input):
            raise self._no_remote_compaction()
        body = chat_body(request)
        text_parts: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: Usage | None = None
        response_id: str | None = None
        finished = False
        async with self._conn.stream_post("chat/completions", body) as response:
            async for sse in aiter_sse(response.aiter_lines()):
                if sse.data.strip() == "[DONE]":
                    finished = True
                    break
                try:
                    chunk = json.loads(sse.data)
                except ValueError:
                    logger.warning("skipping unparsable chat chunk (provider %s)", self.config.name)
                    continue
                if not isinstance(chunk, dict):
                    continue
                if chunk.get("error"):
                    raise self._conn.fail(error_from_event({"type": "error", **chunk}))
                if response_id is None and chunk.get("id"):
                    response_id = str(chunk["id"])
                    yield StreamEvent(type="response.created", response_id=response_id)
                if isinstance(chunk.get("usage"), dict):
                    usage = _chat_usage(chunk["usage"])
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        text_parts.append(delta["content"])
                        yield StreamEvent(type="response.output_text.delta", delta=delta["content"])
                    for call_delta in delta.get("tool_calls") or []:
                        _merge_call(calls, call_delta)
                    if choice.get("finish_reason"):
                        finished = True
        if not finished:
            raise ProviderError(kind=ErrorKind.STREAM_CLOSED, message=STREAM_CLOSED_MESSAGE)

        output: list[dict[str, Any]] = []
        text = "".join(text_parts)
        if text:
            output.append(assistant_message(text))
        for index in sorted(calls):
            call = calls[index]
            output.append(
                {
                    "type": "function_call",
                    "call_id": call["id"] or f"call_{response_id}_{index}",
                    "name": call["name"],
                    "arguments": call["arguments"] or "{}",
                }
            )
        for item in output:
            yield StreamEvent(type="response.output_item.done", item=item)
        if usage is None:
            # No usage chunk: estimate with Codex's bytes/4 rule over what was sent and received (spec §3.1).
            inp = approx_token_count(json.dumps(body["messages"]))
            out = approx_token_count(json.dumps(output))
            usage = Usage(input_tokens=inp, output_tokens=out, total_tokens=inp + out)
        yield StreamEvent(type="response.completed", usage=usage, response_id=response_id)


def _merge_call(calls: dict[int, dict[str, Any]], delta: dict[str, Any]) -> None:
    """Tool calls arrive in pieces keyed by `index`: the id and name once, the arguments as string fragments."""
    index = int(delta.get("index", len(calls)))
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if delta.get("id"):
        call["id"] = delta["id"]
    fn = delta.get("function") or {}
    if fn.get("name"):
        call["name"] += fn["name"]
    if fn.get("arguments"):
        call["arguments"] += fn["arguments"]
