"""The Responses API client over httpx: streamed `/responses` and JSON `/responses/compact` (spec §4.2, §4.3, §13).

`stream_response` makes exactly one HTTP request and never retries: the compaction engine and the turn loop own
their stream-retry loops (spec §6.2, §4.3 step 5), and can use `retry.with_retries`. `compact` retries the HTTP
request itself, as Codex does for the v1 endpoint (`request_max_retries`; 5xx and transport only, spec §4.2 step 4).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx

from compaction_app.engine.port import CompactRequest, CompactResponse, ResponsesRequest, StreamEvent, Usage
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.strategies.remote_common import serde_type
from compaction_app.providers.classify import error_from_event
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.connection import ConnectedClient
from compaction_app.providers.retry import Sleep, is_request_retryable, with_retries
from compaction_app.providers.sse import aiter_sse

logger = logging.getLogger(__name__)

STREAM_CLOSED_MESSAGE = "stream closed before response.completed"
REASONING_INCLUDED_HEADER = "x-reasoning-included"
FAILURE_EVENTS = frozenset({"response.failed", "response.incomplete", "error"})


def parse_compact_output(payload: Any) -> CompactResponse:
    """Validate a `/responses/compact` body: an object whose `output` is an array of objects (spec §4.2 step 5)."""
    if not isinstance(payload, dict):
        raise _bad_response(f"invalid type: {serde_type(payload)}, expected a map with an `output` sequence")
    if "output" not in payload:
        raise _bad_response("missing field `output`")
    output = payload["output"]
    if not isinstance(output, list):
        raise _bad_response(f"`output`: invalid type: {serde_type(output)}, expected a sequence")
    for index, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise _bad_response(f"`output[{index}]`: invalid type: {serde_type(item)}, expected an item with a `type`")
    usage = payload.get("usage")
    return CompactResponse(output=output, usage=Usage.from_json(usage) if isinstance(usage, dict) else None)


def _bad_response(detail: str) -> ProviderError:
    return ProviderError(kind=ErrorKind.BAD_RESPONSE, message=f"failed to parse /responses/compact body: {detail}")


class ResponsesClient(ConnectedClient):
    """A ModelClient for providers that speak the OpenAI Responses API (base.ModelClient)."""

    def __init__(
        self,
        config: ProviderConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(config, transport=transport)
        self._sleep = sleep
        self._rng = rng

    async def stream_response(self, request: ResponsesRequest) -> AsyncIterator[StreamEvent]:
        """Stream one `POST {base}/responses`; end after `response.completed` or raise ProviderError (spec §4.1 step 4).

        `response.failed`/`error` events raise classified errors; an event stream that ends before
        `response.completed` raises STREAM_CLOSED `stream closed before response.completed`.
        """
        async with self._conn.stream_post("responses", request.to_body()) as response:
            reasoning_included = response.headers.get(REASONING_INCLUDED_HEADER, "").lower() == "true"
            async for sse in aiter_sse(response.aiter_lines()):
                if sse.data.startswith("[DONE]"):
                    break
                try:
                    data = json.loads(sse.data)
                except ValueError:
                    # Codex skips events it cannot parse rather than failing the turn.
                    logger.warning("skipping unparsable stream event %r (provider %s)", sse.event, self.config.name)
                    continue
                if not isinstance(data, dict):
                    continue
                kind = data.get("type") or sse.event
                if kind in FAILURE_EVENTS:
                    raise self._conn.fail(error_from_event({**data, "type": kind}))
                event = _to_stream_event(kind, data, reasoning_included)
                if event is None:
                    continue
                yield event
                if kind == "response.completed":
                    return
        raise ProviderError(kind=ErrorKind.STREAM_CLOSED, message=STREAM_CLOSED_MESSAGE)

    async def compact(self, request: CompactRequest) -> CompactResponse:
        """`POST {base}/responses/compact` with HTTP retries for 5xx/transport only (spec §4.2 step 4, §13)."""

        async def once() -> CompactResponse:
            response = await self._conn.post_json("responses/compact", request.to_body())
            try:
                payload = response.json()
            except ValueError as exc:
                raise _bad_response(f"body is not JSON ({exc})") from None
            return parse_compact_output(payload)

        def log_retry(attempt: int, error: ProviderError, delay: float) -> None:
            logger.info("retrying /responses/compact (%d/%d) in %.2fs after %s",
                        attempt, self.config.request_max_retries, delay, error.kind)

        return await with_retries(
            once,
            max_retries=self.config.request_max_retries,
            sleep=self._sleep,
            on_retry=log_retry,
            should_retry=is_request_retryable,
            rng=self._rng,
        )


def _to_stream_event(kind: str, data: dict[str, Any], reasoning_included: bool) -> StreamEvent | None:
    response = data.get("response") if isinstance(data.get("response"), dict) else {}
    if kind == "response.created":
        return StreamEvent(type=kind, response_id=response.get("id"))
    if kind == "response.output_item.done":
        item = data.get("item")
        return StreamEvent(type=kind, item=item) if isinstance(item, dict) else None
    if kind == "response.output_text.delta":
        return StreamEvent(type=kind, delta=str(data.get("delta") or ""))
    if kind == "response.completed":
        usage = response.get("usage")
        return StreamEvent(
            type=kind,
            usage=Usage.from_json(usage if isinstance(usage, dict) else None),
            response_id=response.get("id"),
            reasoning_included=reasoning_included,
        )
    return None
