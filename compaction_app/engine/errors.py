"""Typed failures of a compaction (spec §6). A CompactionError is what an attempt ends with; the history is never
changed by one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from compaction_app.engine.provider_errors import ProviderError


class EngineErrorKind(StrEnum):
    """Failure kinds the engine adds to the provider's ErrorKind values."""

    FATAL = "fatal"  # spec §4.3 step 4: not retried
    INTERRUPTED = "interrupted"  # a PreCompact hook stopped the compaction (Codex TurnAborted)
    BAD_RESPONSE = "bad_response"


class CompactionConfigError(ValueError):
    """The request or settings cannot run (e.g. a remote strategy on a provider without remote compaction).
    Raised before anything happens, so nothing changes."""


@dataclass
class CompactionError(Exception):
    """A compaction that failed. `kind` is a provider ErrorKind value or an EngineErrorKind value."""

    kind: str
    message: str
    http_status: int | None = None
    retryable: bool = False
    code: str | None = None
    retries: int = 0
    # Set when the failure changed the meter (local context-window-exceeded pins it to the usable window).
    active_tokens_after: int | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_provider(cls, error: ProviderError, message: str | None = None) -> CompactionError:
        return cls(
            kind=str(error.kind),
            message=message if message is not None else error.message,
            http_status=error.http_status,
            retryable=error.retryable,
            code=error.code,
        )

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "http_status": self.http_status, "code": self.code}
