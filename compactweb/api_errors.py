"""One error shape for the whole JSON API: {"error": {"code": "...", "message": "..."}} (design: API contract)."""

from __future__ import annotations

from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from compactweb import db_outage

DATABASE_UNAVAILABLE = "database_unavailable"
RETRY_AFTER_SECONDS = 5  # what a 503 asks a client to wait before trying again


def error_body(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


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


def exception_handler(exc, context):
    response = drf_exception_handler(exc, context)
    if response is None:
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
