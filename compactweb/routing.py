"""Routing that Django's URLconf cannot express: websockets, and the simulated model mounted at /sim/."""

from __future__ import annotations

from django.urls import path

from sessions_app.consumers import FleetConsumer, SessionConsumer

websocket_urlpatterns: list = [
    path("ws/fleet/", FleetConsumer.as_asgi()),
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),
]


def http_router(django_app):
    """Send /sim/... to the embedded simulated provider (an ASGI app of its own), everything else to Django."""
    from compaction_app.providers.simulated.app import create_app

    sim_app = create_app(root_path="/sim")

    async def app(scope, receive, send):
        path = scope.get("path", "")
        if path == "/sim" or path.startswith("/sim/"):
            scope = {**scope, "path": path[len("/sim") :] or "/", "root_path": scope.get("root_path", "") + "/sim"}
            await sim_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return app
