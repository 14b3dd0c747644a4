"""Routing that Django's URLconf cannot express: websockets, and the simulated model mounted at /sim/."""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.urls import path, re_path

from compaction_app.providers.simulated.app import create_app
from compaction_app.providers.simulated.recording import RequestRecorder
from compactweb import (
    converters,  # noqa: F401  (registers the <id:...> path converter)
    daphne_denial,
    gateway_metrics,
)
from compactweb.body_limit import asgi_body_limit
from compactweb.sim_mount import MOUNT, guarded_sim_app
from gateway_app import anthropic_proxy
from gateway_app import proxy as gateway
from sessions_app.live.consumers import FleetConsumer, SessionConsumer


class UnknownRouteConsumer(AsyncWebsocketConsumer):
    """Any websocket path without a route: refuse the handshake cleanly (a 403 to the client, no traceback in the
    log for every anonymous probe) instead of letting URLRouter raise."""

    async def connect(self) -> None:
        await self.close()


websocket_urlpatterns: list = [
    path("ws/fleet/", FleetConsumer.as_asgi()),
    path("ws/sessions/<id:session_id>/", SessionConsumer.as_asgi()),
    re_path(r"", UnknownRouteConsumer.as_asgi()),  # last: everything else
]


def _sim_recorder():
    directory = getattr(settings, "COMPACTWEB_SIM_RECORD_DIR", "")
    return RequestRecorder(directory) if directory else None


def create_mounted_app(*, recorder=None):
    """The simulator as /sim serves it: the body cap from settings, behind the guard (compactweb.sim_mount)."""
    return guarded_sim_app(create_app(root_path=MOUNT, recorder=recorder,
                                      max_body_bytes=settings.COMPACTWEB_SIM_MAX_BODY_BYTES))


def _is_sim(path: str) -> bool:
    return path == "/sim" or path.startswith("/sim/")


def _is_gateway(path: str) -> bool:
    return path == gateway.MOUNT or path.startswith(gateway.MOUNT + "/")


def _to_gateway(scope):
    path = scope.get("path", "")
    return {**scope, "path": path[len(gateway.MOUNT):] or "/", "root_path": scope.get("root_path", "") + gateway.MOUNT}


def sim_websocket_router(websocket_app):
    """Websockets to /sim/... reach the simulated model and those to /gateway/... the gateway, which both refuse the
    upgrade so that clients (Codex tries a Responses websocket first) fall back to HTTP at once; every other
    websocket goes to `websocket_app`."""
    sim_app = create_app(root_path="/sim")
    daphne_denial.install()

    async def app(scope, receive, send):
        path = scope.get("path", "")
        if _is_sim(path) or _is_gateway(path):
            if daphne_denial.SUPPORTED:
                scope = {**scope, "extensions": {**(scope.get("extensions") or {}), "websocket.http.response": {}}}
            await (sim_app if _is_sim(path) else gateway.app)(scope, receive, send)
        else:
            await websocket_app(scope, receive, send)

    return app


def http_router(django_app):
    """Send /gateway/... to the gateway (gateway_app.proxy: its own keys and body limits), /sim/... to the embedded
    simulated provider (an ASGI app of its own, behind the guard of compactweb.sim_mount) when
    COMPACTWEB_SIM_ENABLED, everything else to Django."""
    django_app = asgi_body_limit(django_app)  # 413 before an oversized body is read (the simulator has its own cap)
    sim_app = create_mounted_app(recorder=_sim_recorder()) if settings.COMPACTWEB_SIM_ENABLED else None
    gateway_app = gateway_metrics.observed(anthropic_proxy.dispatch)

    async def app(scope, receive, send):
        path = scope.get("path", "")
        if _is_gateway(path):
            await gateway_app(_to_gateway(scope), receive, send)
        elif sim_app is not None and _is_sim(path):
            scope = {**scope, "path": path[len("/sim") :] or "/", "root_path": scope.get("root_path", "") + "/sim"}
            await sim_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return app
