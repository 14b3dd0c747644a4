"""One error shape for the whole JSON API: {"error": {"code": "...", "message": "..."}} (design: API contract), and
the one mapping of a service's domain error (compactweb.domain_errors) to the HTTP status it is answered with."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from django.db import DataError

# Only DRF's light modules here: every Django process imports this module (a job's answer, the error pages), and
# `rest_framework.response` and `.views` pull in DRF's serializers, requests, drf-spectacular and django.test,
# about 0.1 s of CPU that a Celery worker or the scheduler never uses; `exception_handler` imports them when the
# API first answers an error (issue 42: every such start is seconds on a saturated host).
from rest_framework import exceptions, status

from compactweb import db_outage
from compactweb.domain_errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    Unavailable,
    UpstreamFailed,
)

DATABASE_UNAVAILABLE = "database_unavailable"
RETRY_AFTER_SECONDS = 5  # what a 503 asks a client to wait before trying again


# The one place a domain error's category becomes an HTTP status (API answers, pages, a job's recorded answer).
STATUSES: dict[type[DomainError], int] = {
    Invalid: status.HTTP_400_BAD_REQUEST,
    Forbidden: status.HTTP_403_FORBIDDEN,
    NotFound: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    UpstreamFailed: status.HTTP_502_BAD_GATEWAY,
    Unavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
}
CREATED = status.HTTP_201_CREATED
INTERNAL_ERROR = "internal_error"


def error_body(code: str, message: str, **extra) -> dict:
    return {"error": {"code": code, "message": message, **extra}}


def status_for(exc: DomainError) -> int:
    """The status of the first category in the error's class hierarchy (a `Conflict` that is also a transfer
    refusal answers 409); 500 for a DomainError of no category, which is a bug."""
    for cls in type(exc).__mro__:
        if cls in STATUSES:
            return STATUSES[cls]
    return status.HTTP_500_INTERNAL_SERVER_ERROR


class Answer(NamedTuple):
    """What the API answers for a piece of work: a status and a body (the result, or the error body)."""

    status: int
    body: dict

    @property
    def ok(self) -> bool:
        return self.status < status.HTTP_400_BAD_REQUEST


def error_answer(exc: DomainError) -> Answer:
    return Answer(status_for(exc), error_body(exc.code, exc.message, **exc.extra))


def unexpected_answer(exc: BaseException) -> Answer:
    """An exception nobody foresaw (a bug): still an answer in the API's shape, naming only the exception's type."""
    return Answer(status.HTTP_500_INTERNAL_SERVER_ERROR,
                  error_body(INTERNAL_ERROR, f"{type(exc).__name__}: the job failed"))


def answer(work: Callable[[], dict]) -> Answer:
    """201 with what `work()` returns, or the answer for the domain error it raised."""
    try:
        return Answer(CREATED, work())
    except DomainError as exc:
        return error_answer(exc)


class ApiError(exceptions.APIException):
    """Raise from a view or service wrapper to answer with a specific status, code and message."""

    def __init__(self, *, status_code: int, code: str, message: str):
        self.status_code = status_code
        self.code = code
        super().__init__(detail=message, code=code)


def _flatten(detail, path: str = "") -> str:
    if isinstance(detail, dict):
        return "; ".join(_flatten(v, f"{path}.{k}" if path else str(k)) for k, v in detail.items())
    if isinstance(detail, list):
        if all(not isinstance(d, dict | list) for d in detail):
            msg = " ".join(str(d) for d in detail)
            return f"{path}: {msg}" if path else msg
        return "; ".join(_flatten(v, f"{path}[{i}]") for i, v in enumerate(detail))
    return f"{path}: {detail}" if path else str(detail)


def out_of_range(exc: BaseException) -> bool:
    """Whether the database refused a number as too large: SQLite's OverflowError at binding, PostgreSQL's
    numeric_value_out_of_range (22003). Each API input is bounded by its serializer; this is the net behind them."""
    if isinstance(exc, OverflowError) and "SQLite INTEGER" in str(exc):
        return True
    cause = exc.__cause__
    return isinstance(exc, DataError) and getattr(cause, "sqlstate", None) == "22003"


def exception_handler(exc, context):
    from rest_framework.response import Response
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, DomainError):
        refusal = error_answer(exc)
        return Response(refusal.body, status=refusal.status)
    response = drf_exception_handler(exc, context)
    if response is None:
        if out_of_range(exc):  # a number past what the database stores, in a field no serializer bounded
            return Response(error_body("invalid", "a number in the request is out of range (at most 2**63 - 1)"),
                            status=status.HTTP_400_BAD_REQUEST)
        if db_outage.is_conflict(exc):  # a deadlock or serialization failure its retries did not get past
            return Response(error_body(db_outage.WRITE_CONFLICT, db_outage.CONFLICT_MESSAGE),
                            status=status.HTTP_409_CONFLICT, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        if db_outage.is_unavailable(exc):  # a restart or a full disk: try again, not a server error
            return Response(error_body(DATABASE_UNAVAILABLE, db_outage.UNAVAILABLE_MESSAGE),
                            status=status.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return None
    if isinstance(exc, ApiError):
        code = exc.code
    elif isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        code = "not_authenticated"
    elif isinstance(exc, exceptions.PermissionDenied):
        code = "permission_denied"
    elif isinstance(exc, exceptions.NotFound):
        code = "not_found"
    elif isinstance(exc, exceptions.ValidationError):
        code = "invalid"
    else:
        code = getattr(exc, "default_code", "error")
    return Response(
        error_body(code, _flatten(response.data if not isinstance(exc, ApiError) else exc.detail)),
        status=response.status_code or status.HTTP_400_BAD_REQUEST,
        headers={k: v for k, v in response.headers.items() if k in ("WWW-Authenticate", "Retry-After")},
    )
