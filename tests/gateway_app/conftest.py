"""A gateway route whose upstream is a simulated model that writes down every request it receives."""

from __future__ import annotations

import contextlib
import logging

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application

from compaction_app.models import CompactionPolicy, Provider
from compaction_app.providers.simulated.app import create_app
from compaction_app.providers.simulated.recording import RequestRecorder, read_requests
from compactweb.routing import http_router
from gateway_app import limits, proxy, upstream
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayRoute

UPSTREAM_KEY = "upstream-secret-key"
UPSTREAM_URL = "http://upstream.invalid/v1"
ANTHROPIC_UPSTREAM = "http://upstream.invalid/anthropic"  # a Messages-API upstream: Claude Code's base URL form


class Upstream:
    """The upstream's ASGI app (a recording simulated model, or any app a test gives) and what it received."""

    def __init__(self, directory) -> None:
        self.directory = directory
        self.app = create_app(recorder=RequestRecorder(directory))
        self.seen_headers: list[dict[str, str]] = []

    def requests(self) -> list[dict]:
        return read_requests(self.directory)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.seen_headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@pytest.fixture(autouse=True)
def _recorder_connections_closed():
    yield
    proxy.close_recorder_connections()


@pytest.fixture(autouse=True)
def _no_failed_keys_counted():
    """Every test's requests come from 127.0.0.1: one test's unknown keys must not count against the next's."""
    limits.failed_keys = limits.FailedKeys()
    yield
    limits.failed_keys = limits.FailedKeys()


@pytest.fixture
def sim_upstream(tmp_path, monkeypatch, settings):
    up = Upstream(tmp_path / "upstream")
    monkeypatch.setenv("COMPACTWEB_KEY_GATEWAY_TEST", UPSTREAM_KEY)
    # the key goes only to the base URL it is bound to (issue 27, docs/security.md)
    settings.COMPACTWEB_PROVIDER_KEYS = f"COMPACTWEB_KEY_GATEWAY_TEST={UPSTREAM_URL}"

    def client_for(config):
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=up), timeout=30)

    monkeypatch.setattr(upstream, "client_for", client_for)
    proxy._keys.clear()
    return up


def make_route(*, mode: str = "upstream", rpm: int = 600, max_body: int = 8 * 1024 * 1024, policy=None):
    provider = Provider.objects.create(name=f"upstream-{mode}-{rpm}", base_url=UPSTREAM_URL,
                                       model="compactweb-sim", context_window=32000,
                                       api_key_env="COMPACTWEB_KEY_GATEWAY_TEST")
    policy = policy or CompactionPolicy.objects.create(name=f"gateway-policy-{mode}-{rpm}")
    return GatewayRoute.objects.create(name=f"team-{mode}-{rpm}", provider=provider, policy=policy,
                                       compaction_mode=mode, requests_per_minute=rpm, max_body_bytes=max_body)


@pytest.fixture
def route(db):
    return make_route()


@pytest.fixture
def gateway_key(route):
    return do_create_gateway_key(route=route, client_name="alice-laptop").key


def call(method: str, path: str, **kwargs) -> httpx.Response:
    """One request through the dashboard's HTTP router, then every record it scheduled written."""
    app = http_router(get_asgi_application())

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.request(method, path, **kwargs)
        await proxy.drain()
        return response

    return async_to_sync(go)()


@pytest.fixture
def anthropic_upstream(sim_upstream, settings):
    """The same recording simulated model as a Messages-API upstream (issue 44), its key bound to that URL too."""
    settings.COMPACTWEB_PROVIDER_KEYS = f"COMPACTWEB_KEY_GATEWAY_TEST={ANTHROPIC_UPSTREAM} {UPSTREAM_URL}"
    return sim_upstream


@contextlib.contextmanager
def logged_by(name: str):
    """The records logger `name` emits meanwhile, taken on that logger itself: caplog's handler on the root logger
    does not survive a request's logging set-up."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
