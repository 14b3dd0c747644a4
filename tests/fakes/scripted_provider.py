"""A scripted fake model provider: replays exact replies and records the exact requests it received.

Use it in-process (it is an ASGI app: `httpx.ASGITransport(app=provider)`) or as a real HTTP server on 127.0.0.1::

    provider = ScriptedProvider([
        Reply.sse([created(), output_item_done(assistant("hi")), completed(input_tokens=10, output_tokens=2)]),
        Reply.json(200, {"output": [...]}),
        Reply.error(429, {"error": {"code": "rate_limit_exceeded", "message": "slow down"}},
                    headers={"Retry-After": "1"}),
    ])
    with provider.serve() as base_url:          # "http://127.0.0.1:<port>/v1"
        ...                                      # point a client at base_url
    provider.requests[0].path                    # "/v1/responses"
    provider.requests[0].body                    # the exact bytes sent
    provider.requests[0].json                    # the parsed body

Replies are consumed in order, whatever the path. When the script runs out the provider answers HTTP 500 with code
`script_exhausted` and counts it in `.unexpected`, so a test can assert that nothing unplanned was requested.

`Reply.sse(events, close_after=n)` sends only the first n events and then ends the stream cleanly (a stream closed
before `response.completed`); `abort=True` (HTTP server only) cuts the connection mid-body instead. `delay` (seconds,
HTTP server only) waits before answering, to provoke client timeouts.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Event = dict[str, Any] | str


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: tuple[Event, ...] | None = None
    close_after: int | None = None
    abort: bool = False
    delay: float = 0.0

    @classmethod
    def sse(cls, events: list[Event], *, status: int = 200, headers: dict[str, str] | None = None,
            close_after: int | None = None, abort: bool = False, delay: float = 0.0) -> Reply:
        """A text/event-stream reply. A dict event is sent as `event: <type>` + `data: <json>`; a str verbatim."""
        return cls(status=status, headers={"Content-Type": "text/event-stream", **(headers or {})},
                   events=tuple(events), close_after=close_after, abort=abort, delay=delay)

    @classmethod
    def json(cls, status: int, payload: Any, *, headers: dict[str, str] | None = None, delay: float = 0.0) -> Reply:
        return cls(status=status, headers={"Content-Type": "application/json", **(headers or {})},
                   body=json.dumps(payload).encode("utf-8"), delay=delay)

    @classmethod
    def error(cls, status: int, payload: Any, *, headers: dict[str, str] | None = None) -> Reply:
        return cls.json(status, payload, headers=headers)

    @classmethod
    def raw(cls, status: int, body: bytes, *, headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, headers=headers or {}, body=body)

    def chunks(self) -> list[bytes]:
        """The body as the chunks it is written in (one per SSE event)."""
        if self.events is None:
            return [self.body]
        events = self.events if self.close_after is None else self.events[: self.close_after]
        return [encode_event(e) for e in events]


def encode_event(event: Event) -> bytes:
    if isinstance(event, str):
        return event.encode("utf-8")
    return f"event: {event.get('type', 'message')}\ndata: {json.dumps(event)}\n\n".encode()


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


# -- event builders (the Responses API stream shapes, spec §13) --------------------------------------------------------


def created(response_id: str = "resp_1") -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}


def output_item_done(item: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def output_text_delta(delta: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "delta": delta}


def completed(response_id: str = "resp_1", *, input_tokens: int = 0, output_tokens: int = 0,
              cached_tokens: int = 0) -> dict[str, Any]:
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached_tokens},
             "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens}
    return {"type": "response.completed", "response": {"id": response_id, "status": "completed", "usage": usage}}


def failed(code: str, message: str, response_id: str = "resp_1") -> dict[str, Any]:
    return {"type": "response.failed",
            "response": {"id": response_id, "status": "failed", "error": {"code": code, "message": message}}}


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def compaction(encrypted_content: str = "opaque") -> dict[str, Any]:
    return {"type": "compaction", "encrypted_content": encrypted_content}


# -- the provider ------------------------------------------------------------------------------------------------------


class ScriptedProvider:
    def __init__(self, script: list[Reply] | None = None) -> None:
        self._script: deque[Reply] = deque(script or [])
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.unexpected = 0

    def add(self, *replies: Reply) -> ScriptedProvider:
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        return len(self._script)

    def _take(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
            self.unexpected += 1
        return Reply.json(500, {"error": {"code": "script_exhausted",
                                          "message": f"scripted provider: no reply left for {request.method} "
                                                     f"{request.path}"}})

    # ASGI ------------------------------------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        reply = self._take(RecordedRequest(scope["method"], scope["path"], headers, b"".join(chunks)))
        await send({"type": "http.response.start", "status": reply.status,
                    "headers": [(k.lower().encode(), v.encode()) for k, v in reply.headers.items()]})
        for chunk in reply.chunks():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # real HTTP server --------------------------------------------------------------------------------------------------
    @contextmanager
    def serve(self, base_path: str = "/v1") -> Iterator[str]:
        """Serve on 127.0.0.1 on a free port in a background thread; yields the base URL (`.../v1`)."""
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = provider._take(RecordedRequest(self.command, self.path, headers, body))
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.events is None:
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in reply.chunks():
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                if reply.abort:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b"0\r\n\r\n")

            do_POST = _handle
            do_GET = _handle

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}{base_path}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
