"""The ASGI websocket denial response (`websocket.http.response.*`) for Daphne, which answers a refused handshake
with a fixed 403 (issue 13, item 6).

Codex tries a Responses websocket before each turn and falls back to HTTP at once only when the handshake is
answered with 426 Upgrade Required; a 403 makes it retry with backoff first (seconds per turn). `install()`
teaches Daphne's websocket protocol the two denial messages of the ASGI spec, so an app can refuse with its own
status; `SUPPORTED` tells the router whether to offer the extension in the scope.
"""

from __future__ import annotations

SUPPORTED = False


def install() -> bool:
    """Patch Daphne's WebSocketProtocol once; False when Daphne is not importable (another server)."""
    global SUPPORTED
    if SUPPORTED:
        return True
    try:
        from autobahn.websocket.types import ConnectionDeny
        from daphne.ws_protocol import WebSocketProtocol
    except ImportError:
        return False
    original = WebSocketProtocol.handle_reply

    def handle_reply(self, message):
        kind = message.get("type")
        if kind == "websocket.http.response.start" and self.state == self.STATE_CONNECTING:
            self._denial_status = int(message.get("status") or 403)
            return None
        if kind == "websocket.http.response.body" and hasattr(self, "_denial_status"):
            if not message.get("more_body") and hasattr(self, "handshake_deferred"):
                self.handshake_deferred.errback(ConnectionDeny(code=self._denial_status, reason="Upgrade Required"
                                                               if self._denial_status == 426 else "Refused"))
                del self.handshake_deferred
                self.server.protocol_disconnected(self)
            return None
        return original(self, message)

    WebSocketProtocol.handle_reply = handle_reply
    SUPPORTED = True
    return True
