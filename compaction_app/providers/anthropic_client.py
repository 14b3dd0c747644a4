"""A ModelClient for an upstream that speaks Anthropic's Messages API (issue 44): what a policy's local
summarisation needs when the route in front of Claude Code has an Anthropic Provider.

A Responses request is sent as one `POST {base}/v1/messages` (not streamed; `base` is what Claude Code's
`ANTHROPIC_BASE_URL` would be), its items as messages (`anthropic_format.items_messages`), its instructions as
`system`; the answer's blocks come back as Responses items and its usage in the Responses shape, as the events
the engine reads. There is no remote compaction on this API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from compaction_app.engine.items import message_text
from compaction_app.engine.port import CompactRequest, CompactResponse, ResponsesRequest, StreamEvent, Usage
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.anthropic_format import (
    content_items,
    items_messages,
    tools_of,
    usage_as_responses,
)
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.connection import ConnectedClient

ANTHROPIC_VERSION = "2023-06-01"
EMBEDDED_ANTHROPIC_URL = "http://embedded.invalid/anthropic"  # the embedded simulated model's Messages API
MAX_TOKENS = 16_000


def _is_instruction(item: dict[str, Any]) -> bool:
    return item.get("type") == "message" and item.get("role") in ("developer", "system")


def messages_body(request: ResponsesRequest) -> dict[str, Any]:
    """The Messages request. Developer and system messages (the operator's pinned block, issue 44) go into `system`
    after the instructions: in `messages` they could only be user text, joined to the user's next words, and a
    summary would then report the pins as something the user asked for (and restate them beside the block the
    gateway puts back)."""
    items = list(request.input)
    body: dict[str, Any] = {"model": request.model, "max_tokens": MAX_TOKENS,
                            "messages": items_messages([i for i in items if not _is_instruction(i)])}
    system = [request.instructions or "", *(message_text(i) for i in items if _is_instruction(i))]
    if any(part.strip() for part in system):
        body["system"] = "\n\n".join(part for part in system if part.strip())
    tools = tools_of(request.tools)
    if tools:
        body["tools"] = tools
    return body


class AnthropicClient(ConnectedClient):
    """Messages-API adapter with the ModelClient interface."""

    def __init__(self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(config, transport=transport)
        if config.is_embedded:
            self._conn.base_url = EMBEDDED_ANTHROPIC_URL

    async def compact(self, request: CompactRequest) -> CompactResponse:
        raise ProviderError(kind=ErrorKind.NOT_FOUND, message=(
            f"provider {self.config.name!r} speaks Anthropic's Messages API, which has no remote compaction; "
            "use local summarization"))

    async def stream_response(self, request: ResponsesRequest) -> AsyncIterator[StreamEvent]:
        if any(item.get("type") == "compaction_trigger" for item in request.input):
            await self.compact(request)  # raises
        response = await self._conn.post_json("v1/messages", messages_body(request))
        try:
            answer = json.loads(response.content)
        except ValueError:
            raise ProviderError(kind=ErrorKind.BAD_RESPONSE, message="the Messages API answered with no JSON") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("content"), list):
            raise ProviderError(kind=ErrorKind.BAD_RESPONSE, message="the Messages API answer has no content")
        response_id = str(answer.get("id") or "")
        yield StreamEvent(type="response.created", response_id=response_id)
        for item in content_items("assistant", answer["content"]):
            yield StreamEvent(type="response.output_item.done", item=item)
        yield StreamEvent(type="response.completed", response_id=response_id,
                          usage=Usage.from_json(usage_as_responses(answer.get("usage"))))
