"""What can go wrong in a service, said by what went wrong, never by an HTTP status.

A service refuses or fails by raising a subclass of one of the categories below; the web layer alone turns a
category into a status (compactweb.api_errors.STATUSES), for the JSON API, the pages and a job's recorded answer
alike. Plain Python, so every app may import it (compactweb imports no app).

An error's `code` is the machine-readable reason the API shows (`busy`, `lease_lost`, `invalid_rollout`...), its
message the sentence for a person, and `extra` the fields the error body carries beside them (`attempt_id`...).
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    code = "error"

    def __init__(self, message: str = "", *, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        if code:
            self.code = code
        self.message = message
        self.extra = extra


class Invalid(DomainError):
    """The request cannot run as asked (bad input, a configuration that does not allow it); nothing changed."""

    code = "invalid"


class Forbidden(DomainError):
    """The actor's role does not allow this request (its scope, or a row another user owns); nothing changed."""

    code = "permission_denied"


class NotFound(DomainError):
    """What the request names does not exist."""

    code = "not_found"


class Conflict(DomainError):
    """The request is fine but the state it meets is not (the session is busy, read-only, already has one)."""

    code = "busy"


class UpstreamFailed(DomainError):
    """A model provider or the engine behind it failed; nothing was installed."""

    code = "upstream_failed"


class Unavailable(DomainError):
    """The server cannot answer now (a worker died under the work); the same request may pass later."""

    code = "unavailable"
