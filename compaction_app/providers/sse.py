"""A small server-sent events parser (the WHATWG "event stream" rules the Responses API streams with).

Lines are `field: value`; `data` lines of one event are joined with newlines; lines starting with `:` are comments;
a blank line dispatches the event; an event with no data is dropped, and so is an event the stream ends in the middle
of (no closing blank line), so a truncated `response.completed` never counts as received.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSentEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed lines (without their line terminators); `decode` returns an event when a blank line completes one."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    def decode(self, line: str) -> ServerSentEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = ""
            return None
        sse = ServerSentEvent(data="\n".join(self._data), event=self._event or "message", id=self._id,
                              retry=self._retry)
        self._data = []
        self._event = ""
        self._retry = None
        return sse


def _split_lines(chunks: Iterable[str]) -> Iterator[str]:
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        lines = buffer.splitlines(keepends=True)
        buffer = ""
        # A chunk may end inside a CRLF pair: hold a trailing "\r" back until the next chunk shows what follows.
        if lines and (not lines[-1].endswith(("\n", "\r")) or lines[-1].endswith("\r")):
            buffer = lines.pop()
        yield from lines
    if buffer:
        yield buffer


def iter_sse(chunks: Iterable[str]) -> Iterator[ServerSentEvent]:
    """Parse text chunks (split anywhere) into events."""
    decoder = SSEDecoder()
    for line in _split_lines(chunks):
        sse = decoder.decode(line)
        if sse is not None:
            yield sse


async def aiter_sse(lines: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """Parse an async stream of lines (e.g. `httpx.Response.aiter_lines()`) into events."""
    decoder = SSEDecoder()
    async for line in lines:
        sse = decoder.decode(line)
        if sse is not None:
            yield sse


def encode_sse(data: str, event: str | None = None) -> bytes:
    """Encode one event (multi-line data becomes several `data:` lines)."""
    out = []
    if event:
        out.append(f"event: {event}")
    out.extend(f"data: {line}" for line in data.split("\n"))
    return ("\n".join(out) + "\n\n").encode("utf-8")
