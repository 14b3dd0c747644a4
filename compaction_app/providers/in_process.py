"""An httpx transport to an ASGI app in the same process that hands the JSON request body over as the object the
client built, instead of serialising it and having the app parse it back.

The embedded simulated model receives a session's whole history on every request; serialising and parsing it is
most of a request's cost at 100k items. Everything else stays HTTP: the method, path and headers, the status, the
streamed response. An app reads the body with `request_body()` (None when the request came over the network, which
it then parses as usual). The app must treat the body as read-only: it is the caller's own object.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import httpx

BODY_EXTENSION = "compactweb.json_body"

_body: ContextVar[dict[str, Any] | None] = ContextVar("in_process_json_body", default=None)


def request_body() -> dict[str, Any] | None:
    """The JSON body of the request the app is serving, when an InProcessTransport delivered it."""
    return _body.get()


class InProcessTransport(httpx.ASGITransport):
    """httpx's ASGI transport, plus the body handed over as an object (httpx runs the app in the caller's task, so
    a context variable reaches it)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        token = _body.set(request.extensions.get(BODY_EXTENSION))
        try:
            return await super().handle_async_request(request)
        finally:
            _body.reset(token)
