"""Typed provider errors, classified the way the compaction engine needs them (spec §6)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ErrorKind(StrEnum):
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    INVALID_REQUEST = "invalid_request"
    NOT_FOUND = "not_found"
    SERVER_OVERLOADED = "server_overloaded"
    SERVER_ERROR = "server_error"
    UNEXPECTED_STATUS = "unexpected_status"
    TRANSPORT = "transport"
    TIMEOUT = "timeout"
    STREAM_CLOSED = "stream_closed"
    BAD_RESPONSE = "bad_response"
    UNAUTHORIZED = "unauthorized"


# Which kinds a retry may cure (spec §6.2: transport, 5xx, overload and dropped streams are retried; a request the
# server understood and refused is not).
RETRYABLE_KINDS = frozenset(
    {
        ErrorKind.SERVER_OVERLOADED,
        ErrorKind.SERVER_ERROR,
        ErrorKind.TRANSPORT,
        ErrorKind.TIMEOUT,
        ErrorKind.STREAM_CLOSED,
    }
)


@dataclass
class ProviderError(Exception):
    """A failed model call. `message` is safe to show: it never contains an API key."""

    kind: ErrorKind
    message: str
    http_status: int | None = None
    retry_after: float | None = None
    code: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def __str__(self) -> str:
        return self.message
