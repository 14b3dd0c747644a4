"""Request body size limits (issue 14): an oversized body answers 413 in the API's error shape before it is read.

Two limits, from settings: COMPACTWEB_MAX_REQUEST_BYTES for every request, and the larger
COMPACTWEB_MAX_IMPORT_BYTES for the rollout import (API and page), whose files are long (/sim has its own,
COMPACTWEB_SIM_MAX_BODY_BYTES). Enforced three times:
- `compactweb.daphne_body` in Daphne itself, before Twisted reads the body (issue 27): what stops an anonymous
  client from making the server read a gigabyte.
- `asgi_body_limit` wraps the Django ASGI app (what Daphne serves): a declared Content-Length over the limit is
  refused before a byte is read; a body without one (chunked) is counted as it arrives and refused when it
  crosses the limit, so nothing unbounded reaches memory or disk.
- `BodyLimitMiddleware` checks the declared Content-Length inside Django too (any other server, the test client).
"""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpResponse

IMPORT_PATHS = ("/api/v1/sessions/import", "/import/")
CODE = "request_too_large"


def limit_for_path(path: str) -> int:
    if path.rstrip("/") in {p.rstrip("/") for p in IMPORT_PATHS}:
        return settings.COMPACTWEB_MAX_IMPORT_BYTES
    if settings.COMPACTWEB_SIM_ENABLED and (path == "/sim" or path.startswith("/sim/")):
        return settings.COMPACTWEB_SIM_MAX_BODY_BYTES
    return settings.COMPACTWEB_MAX_REQUEST_BYTES


def _message(limit: int) -> str:
    return f"the request body is larger than {limit} bytes"


def refusal_body(limit: int) -> bytes:
    """The 413's body in the API's error shape, the same from Daphne, the ASGI wrapper and the middleware."""
    return json.dumps({"error": {"code": CODE, "message": _message(limit)}}).encode()


def _declared_length(value: str | None) -> int | None:
    if value is None or not value.strip().isascii() or not value.strip().isdigit():
        return None
    return int(value.strip())


class BodyLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = limit_for_path(request.path_info)
        declared = _declared_length(request.META.get("CONTENT_LENGTH"))
        if declared is not None and declared > limit:
            return HttpResponse(refusal_body(limit), status=413, content_type="application/json")
        return self.get_response(request)


async def _send_413(send, limit: int) -> None:
    body = refusal_body(limit)
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def asgi_body_limit(app):
    async def limited(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        limit = limit_for_path(scope.get("path", ""))
        headers = dict(scope.get("headers", []))
        declared = _declared_length(headers.get(b"content-length", b"").decode("latin-1") or None)
        if declared is not None:
            if declared > limit:
                return await _send_413(send, limit)
            return await app(scope, receive, send)
        # No Content-Length (chunked): read the body here, up to the limit, then replay it to Django.
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > limit:
                return await _send_413(send, limit)
            if not message.get("more_body"):
                break
        replay = iter(messages)
        # Django reads Content-Length bytes (0 when absent): tell it how long the buffered body is.
        scope = {**scope, "headers": [*scope.get("headers", []), (b"content-length", str(size).encode())]}

        async def replayed():
            try:
                return next(replay)
            except StopIteration:
                return await receive()

        return await app(scope, replayed, send)

    return limited
