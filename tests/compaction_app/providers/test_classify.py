"""Classification of HTTP answers, failed stream events and transport errors (spec §6, issue 3)."""

from __future__ import annotations

import json
from email.utils import formatdate

import httpx
import pytest

from compaction_app.engine.provider_errors import ErrorKind
from compaction_app.providers.classify import (
    error_from_event,
    error_from_status,
    error_from_transport,
    parse_retry_after,
)


def _body(code=None, message="m"):
    return json.dumps({"error": {"code": code, "message": message}})


@pytest.mark.parametrize("status, code, kind, retryable", [
    (400, "context_length_exceeded", ErrorKind.CONTEXT_WINDOW_EXCEEDED, False),
    (400, "invalid_value", ErrorKind.INVALID_REQUEST, False),
    (400, "server_is_overloaded", ErrorKind.SERVER_OVERLOADED, True),
    (401, None, ErrorKind.UNAUTHORIZED, False),
    (403, None, ErrorKind.UNAUTHORIZED, False),
    (404, None, ErrorKind.NOT_FOUND, False),
    (429, "rate_limit_exceeded", ErrorKind.SERVER_OVERLOADED, True),
    (503, None, ErrorKind.SERVER_OVERLOADED, True),
    (500, None, ErrorKind.SERVER_ERROR, True),
    (502, None, ErrorKind.SERVER_ERROR, True),
    (418, None, ErrorKind.UNEXPECTED_STATUS, False),
    (409, None, ErrorKind.UNEXPECTED_STATUS, False),
])
def test_status_and_code_map_to_kinds(status, code, kind, retryable):
    error = error_from_status(status, _body(code), {})
    assert (error.kind, error.http_status, error.retryable, error.code) == (kind, status, retryable, code)


def test_message_is_the_status_and_a_short_reason_from_the_error_body_never_the_raw_body():
    assert error_from_status(400, _body("x", "bad field"), {}).message == "HTTP 400: bad field"
    # Issue 27: another server's page or data is not shown to operators, only its size.
    assert error_from_status(502, b"<html>internal admin page</html>", {}).message == (
        "HTTP 502 (an answer of 32 characters without a JSON error message)")
    long = error_from_status(400, _body("x", "line one\r\nline two " + "x" * 500), {}).message
    assert long.startswith("HTTP 400: line one line two x") and len(long) <= len("HTTP 400: ") + 200
    assert "\n" not in long


def test_retry_after_seconds_milliseconds_and_http_date():
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": formatdate(1_000_030, usegmt=True)}, now=1_000_000) == 30.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    assert error_from_status(429, _body(), {"Retry-After": "4"}).retry_after == 4.0


def test_rate_limit_delay_is_read_from_the_message_when_no_header():
    error = error_from_status(429, _body("rate_limit_exceeded", "Please try again in 1.5s."), {})
    assert error.retry_after == 1.5


@pytest.mark.parametrize("code, kind", [
    ("context_length_exceeded", ErrorKind.CONTEXT_WINDOW_EXCEEDED),
    ("server_is_overloaded", ErrorKind.SERVER_OVERLOADED),
    ("rate_limit_exceeded", ErrorKind.SERVER_OVERLOADED),
    ("invalid_prompt", ErrorKind.INVALID_REQUEST),
    ("something_else", ErrorKind.SERVER_ERROR),
])
def test_response_failed_event_codes(code, kind):
    event = {"type": "response.failed", "response": {"error": {"code": code, "message": "try again in 250ms"}}}
    error = error_from_event(event)
    assert error.kind is kind and error.code == code and error.http_status is None
    if code == "rate_limit_exceeded":
        assert error.retry_after == 0.25


def test_error_event_and_incomplete_event():
    assert error_from_event({"type": "error", "code": "context_length_exceeded", "message": "x"}).kind is (
        ErrorKind.CONTEXT_WINDOW_EXCEEDED)
    incomplete = error_from_event({"type": "response.incomplete",
                                   "response": {"incomplete_details": {"reason": "max_output_tokens"}}})
    assert incomplete.message == "Incomplete response returned, reason: max_output_tokens" and incomplete.retryable


def test_timeouts_and_transport_errors():
    request = httpx.Request("POST", "http://x/v1/responses")
    timeout = error_from_transport(httpx.ReadTimeout("slow", request=request))
    assert timeout.kind is ErrorKind.TIMEOUT and timeout.retryable
    refused = error_from_transport(httpx.ConnectError("refused", request=request))
    assert refused.kind is ErrorKind.TRANSPORT and refused.retryable and "refused" in refused.message
