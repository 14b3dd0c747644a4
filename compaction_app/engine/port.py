"""The contract between model callers (engine, turn loop) and model clients.

Requests are plain dataclasses whose `to_body()` gives the exact JSON sent on the wire (spec §13); a client streams
`StreamEvent`s for `/responses` and returns the parsed `output` array for `/responses/compact`. A request's `input`
may be a `HistorySnapshot` (a turn's live history, handed over without a copy): a JSON encoder takes
`history_snapshot.as_list(input)`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Usage:
        """Parse a Responses `usage` object (cached tokens may sit in `input_tokens_details`)."""
        if not data:
            return cls()
        cached = data.get("cached_input_tokens")
        if cached is None:
            cached = (data.get("input_tokens_details") or {}).get("cached_tokens", 0)
        inp = int(data.get("input_tokens") or 0)
        out = int(data.get("output_tokens") or 0)
        return cls(
            input_tokens=inp,
            cached_input_tokens=int(cached or 0),
            output_tokens=out,
            total_tokens=int(data.get("total_tokens") or inp + out),
        )


@dataclass
class _ModelRequest:
    """What both requests to a model send: the model, the history and what a normal turn's request carries with it
    (spec §13: a remote compaction sends the turn's instructions, tools and reasoning)."""

    model: str
    input: Sequence[dict[str, Any]]
    instructions: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    parallel_tool_calls: bool = False
    reasoning: dict[str, Any] | None = None
    prompt_cache_key: str | None = None


@dataclass
class ResponsesRequest(_ModelRequest):
    """A streamed `POST {base}/responses` (a normal turn, local summarisation, or remote v2 with a trigger)."""

    client_metadata: dict[str, str] | None = None
    tool_choice: str = "auto"

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "instructions": self.instructions,
            "input": self.input,
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "reasoning": self.reasoning,
            "store": False,
            "stream": True,
            "include": ["reasoning.encrypted_content"] if self.reasoning else [],
        }
        if self.prompt_cache_key:
            body["prompt_cache_key"] = self.prompt_cache_key
        if self.client_metadata:
            body["client_metadata"] = self.client_metadata
        return body


@dataclass
class CompactRequest(_ModelRequest):
    """A `POST {base}/responses/compact` (remote v1, spec §13): no stream/store/include/tool_choice fields."""

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": self.input}
        if self.instructions:
            body["instructions"] = self.instructions
        body["tools"] = self.tools
        body["parallel_tool_calls"] = self.parallel_tool_calls
        if self.reasoning:
            body["reasoning"] = self.reasoning
        if self.prompt_cache_key:
            body["prompt_cache_key"] = self.prompt_cache_key
        return body


@dataclass(frozen=True)
class StreamEvent:
    """One parsed server-sent event of a `/responses` stream.

    type is the wire event type: `response.created`, `response.output_item.done` (item set),
    `response.output_text.delta` (delta set), `response.completed` (usage and response_id set).
    Failures are raised as ProviderError, never yielded.
    """

    type: str
    item: dict[str, Any] | None = None
    delta: str | None = None
    usage: Usage | None = None
    response_id: str | None = None
    reasoning_included: bool = False


@dataclass(frozen=True)
class CompactResponse:
    output: list[dict[str, Any]]
    usage: Usage | None = None


class ModelClient(Protocol):
    """What the engine and the turn loop need from a provider. Implementations raise ProviderError."""

    model: str

    def stream_response(self, request: ResponsesRequest) -> AsyncIterator[StreamEvent]: ...

    async def compact(self, request: CompactRequest) -> CompactResponse: ...
