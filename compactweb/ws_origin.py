"""Websocket Origin check, exact (issue 14): scheme, host and port.

Channels' AllowedHostsOriginValidator compares only the Origin's host with ALLOWED_HOSTS, so a page served from
another port of an allowed host (another app on localhost, say) could open the dashboard's websockets with the
user's cookie. Here the Origin must be the dashboard's own origin (the Host the browser connected to, with the
scheme of the connection, and that Host must be allowed) or be listed exactly in CSRF_TRUSTED_ORIGINS (what a
TLS-terminating proxy's public origin should be listed in).
"""

from __future__ import annotations

from compactweb.origins import origin_allowed


async def deny_handshake(scope, receive, send) -> None:
    """Refuse the handshake (the server answers 403) without a consumer: channels' WebsocketDenier would first
    open a channel on the layer and block in its receive, which Redis then has to serve for a page refused anyway."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close"})


class ExactOriginValidator:
    """ASGI middleware for websocket scopes: deny the handshake unless `origin_allowed`."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if not origin_allowed(origin=headers.get("origin", ""), host=headers.get("host", ""),
                                  scheme=scope.get("scheme", "ws")):
                return await deny_handshake(scope, receive, send)
        return await self.application(scope, receive, send)
