"""Helpers for the live UI tests: websocket communicators authenticated by a real session cookie."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

ORIGIN = (b"origin", b"http://localhost")
HOST = (b"host", b"localhost")  # the Origin check is exact: Origin must be the origin of the Host connected to


@pytest.fixture
def cookie_for() -> Callable:
    """cookie_for(user) → the Cookie header of a logged-in browser session (None → anonymous)."""

    def make(user) -> tuple[bytes, bytes] | None:
        if user is None:
            return None
        client = Client()
        client.force_login(user)
        return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())

    return make


@pytest.fixture
def ws_for(cookie_for) -> Callable:
    """await ws_for(user, path) → a WebsocketCommunicator on the real ASGI app (origin checked, cookie auth)."""
    from channels.db import database_sync_to_async

    from compactweb.asgi import application

    async def make(user, path: str) -> WebsocketCommunicator:
        headers = [ORIGIN, HOST]
        cookie = await database_sync_to_async(cookie_for)(user)
        if cookie:
            headers.append(cookie)
        return WebsocketCommunicator(application, path, headers=headers)

    return make


@pytest.fixture
def make_user(db) -> Callable:
    """As the root make_user, but (re)creating the role groups: a transactional test's flush empties the table
    the migration filled, and the websocket tests are transactional."""
    from django.contrib.auth.models import Group, User

    from compactweb.roles import ROLES

    counter = iter(range(1, 10_000))

    def make(role: str | None = None, username: str | None = None, password: str | None = None) -> User:
        for name in ROLES:
            Group.objects.get_or_create(name=name)
        user = User.objects.create_user(
            username=username or f"{role or 'norole'}-{next(counter)}", password=password or "pw-for-tests-only"
        )
        if role:
            user.groups.add(Group.objects.get(name=role))
        return user

    return make


@pytest.fixture
def norole_user(make_user):
    return make_user(None)


@pytest.fixture(autouse=True)
def _fast_fleet_flush(monkeypatch):
    from sessions_app.live.consumers import FleetConsumer

    monkeypatch.setattr(FleetConsumer, "flush_seconds", 0.02)


@pytest.fixture(autouse=True)
def _in_memory_channel_layer(settings):
    """The in-process websocket tests run on the in-memory layer in every pass. channels-redis on redis-py can
    lose the cancellation of a receive that is still connecting, and the test's event loop then waits for it at
    teardown for ever; the consumers guard against that (sessions_app.live.consumers.cancel_until_done) but a
    receive retrying its connect can outlast the guard. Redis itself is exercised by tests/scale_out, with real
    Daphne and worker processes."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _live_pools_closed_after_each_test():
    """The live pools keep their threads' database connections for a moment after the last call
    (sessions_app.live.pools); a test's database is flushed or dropped after it, so they are closed at once."""
    yield
    from sessions_app.live import consumers

    consumers.close_pool_connections()
