"""Daphne's HTTP request, taught to refuse a body before Twisted reads it (issue 27).

Twisted's `http.Request` writes the whole body to memory or a temporary file before Daphne hands the request to
the ASGI app, and then parses urlencoded and multipart bodies into `request.args` on the reactor thread, the one
thread every request and websocket of the process shares. One anonymous 70 MB urlencoded POST froze a process for a
minute; a 1 GB body was spooled to disk before Django's 413. `BoundedWebRequest`, Daphne's request with three
changes, closes both:

- a declared Content-Length over the path's limit (`compactweb.body_limit.limit_for_path`) is answered 413 as soon
  as the headers are in, and the connection closed without reading the body (no `100 Continue` either);
- a body without one (chunked) is counted as it arrives and cut off the same way when it crosses the limit;
- Twisted's form parsing is off (`parsePOSTFormSubmission=False`): Django parses what it needs, off the reactor.

`install()` makes Daphne's HTTP factory build these requests. `compactweb.asgi` calls it, so every way of serving
the app with Daphne (`daphne compactweb.asgi:application`, `scripts/dev`, `scripts/scale-out`) gets it; another ASGI
server keeps the two checks of `compactweb.body_limit`, which then run after the server has read the body.
"""

from __future__ import annotations

from urllib.parse import unquote

from compactweb.body_limit import limit_for_path, refusal_body

INSTALLED = False


def _refusal(limit: int) -> bytes:
    body = refusal_body(limit)
    head = (b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n")
    return head + body


def _request_class():
    from daphne.http_protocol import WebRequest

    class BoundedWebRequest(WebRequest):
        """Daphne's WebRequest with the body limit applied while Twisted receives it."""

        def __init__(self, channel, *args, **kwargs):
            kwargs["parsePOSTFormSubmission"] = False
            self._body_limit = 0
            self._body_received = 0
            self._refused = False
            super().__init__(channel, *args, **kwargs)

        def _limit(self) -> int:
            # The request line is parsed before the headers; `uri` is only set once the body is in.
            target = getattr(self.channel, "_path", b"") or b""
            path = target.split(b"?", 1)[0].decode("latin-1")
            return limit_for_path(unquote(path))

        def _refuse(self) -> None:
            self._refused = True
            channel = self.channel
            channel.transport.write(_refusal(self._body_limit))
            # Stops reading at once (what is left in the socket is never read) and closes once the 413 is written.
            channel.loseConnection()

        def gotLength(self, length):
            self._body_limit = self._limit()
            if length is not None and length > self._body_limit:
                self.requestHeaders.removeHeader(b"Expect")  # no "100 Continue" after the 413
                self._refuse()
                return
            super().gotLength(length)

        def handleContentChunk(self, data):
            if self._refused:
                return
            self._body_received += len(data)
            if self._body_received > self._body_limit:
                self._refuse()
                return
            super().handleContentChunk(data)

        def requestReceived(self, command, path, version):
            if self._refused:
                return  # the rest of a refused body arrived in the same read; the app never sees it
            super().requestReceived(command, path, version)

    return BoundedWebRequest


def install() -> bool:
    """Make Daphne's HTTP factory build `BoundedWebRequest`s; False when Daphne is not importable."""
    global INSTALLED
    if INSTALLED:
        return True
    try:
        from daphne.http_protocol import HTTPFactory
    except ImportError:
        return False
    request_class = _request_class()
    original = HTTPFactory.buildProtocol

    def build_protocol(self, addr):
        protocol = original(self, addr)
        if protocol is not None:
            protocol.requestFactory = request_class
        return protocol

    HTTPFactory.buildProtocol = build_protocol
    HTTPFactory.bounded_request_class = request_class
    INSTALLED = True
    return True
