"""Turn HTTP statuses, error bodies, failed stream events and transport exceptions into ProviderErrors (spec §6).

The engine decides what to do from `ProviderError.kind` alone: context window exceeded triggers the trim-and-retry of
§6.1, retryable kinds go through the backoff of §6.2, everything else fails the attempt.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

import httpx

from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.reasons import short_reason

CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
OVERLOAD_CODES = frozenset({"server_is_overloaded", "slow_down"})
RATE_LIMIT_CODE = "rate_limit_exceeded"
# "Please try again in 1.5s" / "in 250ms": OpenAI puts the rate-limit delay in the message of a failed stream.
_TRY_AGAIN = re.compile(r"try again in\s*(\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` (seconds or an HTTP date); None when absent/bad."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_object(body: Any) -> dict[str, Any]:
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            return inner
        if "code" in body or "message" in body:
            return body
    return {}


def _delay_from_message(message: str) -> float | None:
    match = _TRY_AGAIN.search(message or "")
    if not match:
        return None
    value = float(match.group(1))
    return value / 1000 if match.group(2).lower() == "ms" else value


def error_from_status(status: int, body: bytes | str, headers: Mapping[str, str]) -> ProviderError:
    """Classify a non-2xx HTTP answer (spec §6; issue 3 table)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        parsed: Any = json.loads(text) if text else None
    except ValueError:
        parsed = None
    err = _error_object(parsed)
    code = err.get("code") if isinstance(err.get("code"), str) else None
    detail = err.get("message") if isinstance(err.get("message"), str) else ""
    # Issue 27: operators see the status and a short reason from the provider's JSON error, never the raw body
    # (a URL pointed at some other server would otherwise show that server's answers).
    if detail:
        message = f"HTTP {status}: {short_reason(detail)}"
    elif text:
        message = f"HTTP {status} (an answer of {len(text)} characters without a JSON error message)"
    else:
        message = f"HTTP {status}"
    retry_after = parse_retry_after(headers)

    if status == 400 and code == CONTEXT_LENGTH_EXCEEDED:
        kind = ErrorKind.CONTEXT_WINDOW_EXCEEDED
    elif status == 429 or status == 503 or code in OVERLOAD_CODES:
        kind = ErrorKind.SERVER_OVERLOADED
        if retry_after is None:
            retry_after = _delay_from_message(detail or "")
    elif status == 400:
        kind = ErrorKind.INVALID_REQUEST
    elif status in (401, 403):
        kind = ErrorKind.UNAUTHORIZED
    elif status == 404:
        kind = ErrorKind.NOT_FOUND
    elif 500 <= status < 600:
        kind = ErrorKind.SERVER_ERROR
    else:
        kind = ErrorKind.UNEXPECTED_STATUS
    return ProviderError(kind=kind, message=message, http_status=status, retry_after=retry_after, code=code)


def error_from_event(data: Mapping[str, Any]) -> ProviderError:
    """Classify a `response.failed`, `response.incomplete` or `error` stream event."""
    kind_name = data.get("type")
    if kind_name == "response.incomplete":
        reason = ((data.get("response") or {}).get("incomplete_details") or {}).get("reason", "unknown")
        return ProviderError(kind=ErrorKind.SERVER_ERROR,
                             message=f"Incomplete response returned, reason: {short_reason(str(reason))}")
    err = _error_object(data.get("response") if kind_name == "response.failed" else data)
    code = err.get("code") if isinstance(err.get("code"), str) else None
    message = err.get("message") if isinstance(err.get("message"), str) else f"{kind_name} without a message"
    retry_after = None
    if code == CONTEXT_LENGTH_EXCEEDED:
        kind = ErrorKind.CONTEXT_WINDOW_EXCEEDED
    elif code in OVERLOAD_CODES or code == RATE_LIMIT_CODE:
        kind = ErrorKind.SERVER_OVERLOADED
        retry_after = _delay_from_message(message)
    elif code in ("invalid_prompt", "invalid_request_error"):
        kind = ErrorKind.INVALID_REQUEST
    else:
        # An unexplained failure mid-stream is worth another try (spec §6.2 retries stream errors).
        kind = ErrorKind.SERVER_ERROR
    return ProviderError(kind=kind, message=short_reason(message), retry_after=retry_after, code=code)


def error_from_transport(exc: httpx.TransportError) -> ProviderError:
    """A timeout is TIMEOUT, any other connection-level failure TRANSPORT; both are retryable."""
    name = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(kind=ErrorKind.TIMEOUT, message=f"request timed out ({name})")
    detail = str(exc) or name
    return ProviderError(kind=ErrorKind.TRANSPORT, message=f"transport error ({name}): {detail}")


def redact(error: ProviderError, secret: str | None) -> ProviderError:
    """Remove a secret from an error message (a server may echo the Authorization header back in its body)."""
    if secret and secret in error.message:
        error.message = error.message.replace(secret, "[redacted]")
        error.args = (error.message,)
    return error
