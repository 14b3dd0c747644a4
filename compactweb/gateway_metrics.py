"""The gateway's request metrics, observed around its ASGI app (compactweb.routing mounts it wrapped), so the proxy
carries no measuring code: the wrapper sees the status, the first byte of the body and the last go out, and a
client that went away. The proxy adds one thing it alone knows, the caller's route and its compaction mode
(`admitted`, once the gateway key is checked).

Upstream errors are told from the answer: the gateway's own 502 (`upstream_unreachable`: the upstream did not
answer), any status of 500 or more the upstream sent, passed on as it came, and a stream that ended with a
`response.failed` event (the gateway ends a stream the upstream cut that way, and an upstream fails one so). The
gateway's own 500 (`compaction_failed`, compactweb mode) is a compaction's failure, counted with the compactions.
"""

from __future__ import annotations

import asyncio
import json
import time

from compactweb import metrics

SCOPE_KEY = "compactweb.gateway_metrics"
ENDPOINTS = {"/v1/responses": "responses", "/v1/responses/compact": "responses/compact", "/v1/models": "models",
             "/anthropic/v1/messages": "anthropic/messages",
             "/anthropic/v1/messages/count_tokens": "anthropic/count_tokens"}
ROUTE_PREFIX = "/r/"
OWN_5XX = {"upstream_unreachable": "unreachable", "compaction_failed": ""}  # the gateway's own error codes
UPSTREAM_STATUS = "upstream_status"
STREAM_FAILED = "stream_failed"
FAILED_EVENT = b"event: response.failed"  # the Responses API's failed stream (gateway_app.wire.failed_event)
MESSAGES_FAILED_EVENT = b"event: error\n"  # the Messages API's (anthropic_wire.error_event); a newline: an SSE line, never inside JSON text
ERROR_BODY_LIMIT = 4096  # an error body longer than this is the upstream's, not one of the gateway's


def admitted(scope, *, route: str, mode: str) -> None:
    """The request's route and compaction mode, known once its gateway key is checked."""
    labels = scope.get(SCOPE_KEY)
    if labels is not None:
        labels.update(route=route, mode=mode)


def endpoint_of(path: str) -> str:
    if path.startswith(ROUTE_PREFIX):
        _, _, rest = path[len(ROUTE_PREFIX):].partition("/")
        path = "/" + rest
    return ENDPOINTS.get(path.rstrip("/") or "/", metrics.OTHER)


class _Answer:
    def __init__(self, started: float) -> None:
        self.started = started
        self.status = 0
        self.first_byte: float | None = None
        self.ended = False
        self.hung_up = False
        self.error_body = b""
        # Whether the stream carried a `response.failed` event, matched across the body's chunks: an upstream's
        # event (the gateway passes its chunks on as they came) can be split anywhere, and its data can run on over
        # later chunks, so neither the last chunk nor any one chunk need hold the whole event line.
        self.stream_failed = False
        self._tail = b""

    def seen(self, message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body and not self.stream_failed:
                keep = len(FAILED_EVENT) - 1  # the most of the event line one chunk can end with
                seen = self._tail + body[:keep]
                self.stream_failed = any(event in body or event in seen
                                         for event in (FAILED_EVENT, MESSAGES_FAILED_EVENT))
                self._tail = body[-keep:] if len(body) >= keep else (self._tail + body)[-keep:]
            if self.first_byte is None and (body or not message.get("more_body")):
                self.first_byte = time.monotonic() - self.started
            if self.status >= 500 and len(self.error_body) <= ERROR_BODY_LIMIT:
                self.error_body += body
            if not message.get("more_body"):
                self.ended = True

    def upstream_error(self) -> str:
        if self.status < 500:
            return STREAM_FAILED if self.stream_failed else ""
        try:
            code = json.loads(self.error_body)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return UPSTREAM_STATUS
        return OWN_5XX.get(code, UPSTREAM_STATUS) if isinstance(code, str) else UPSTREAM_STATUS


def observed(app):
    """`app` (the gateway's ASGI app) with each HTTP request counted and timed (compactweb.metrics)."""

    async def wrapper(scope, receive, send):
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        answer = _Answer(time.monotonic())
        labels = {"route": "", "mode": ""}

        async def watched_receive():
            message = await receive()
            if message.get("type") == "http.disconnect" and not answer.ended:
                answer.hung_up = True
            return message

        async def watched_send(message):
            answer.seen(message)
            try:
                await send(message)
            except BaseException:
                answer.hung_up = True
                raise

        try:
            await app({**scope, SCOPE_KEY: labels}, watched_receive, watched_send)
        except asyncio.CancelledError:  # the server gave up on a request whose client went away
            answer.hung_up = answer.hung_up or not answer.ended
            raise
        except Exception:
            answer.status = answer.status or 500  # what the server answers for an app that raised
            raise
        finally:
            metrics.gateway_request(
                route=labels["route"], endpoint=endpoint_of(scope.get("path", "")), mode=labels["mode"],
                status=answer.status, first_byte=answer.first_byte, total=time.monotonic() - answer.started,
                hung_up=answer.hung_up, upstream_error=answer.upstream_error())

    return wrapper
