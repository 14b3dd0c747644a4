"""Issue 14: websockets check the Origin exactly (scheme, host and port), and a websocket to a path without a
route is refused cleanly instead of raising in the router."""

from __future__ import annotations

import logging

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.test import Client

from compactweb.asgi import application
from compactweb.origins import normalise_origin, origin_allowed
from compactweb.roles import ROLES

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _in_memory_channel_layer(settings):
    """As tests/ui/conftest.py: in-process websocket tests never leave a Redis receive behind at teardown."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _operator_cookie() -> bytes:
    for name in ROLES:  # a transactional test's flush empties the groups the migration made
        Group.objects.get_or_create(name=name)
    user, _ = User.objects.get_or_create(username="ws-operator")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _connect(*, origin: str | None, host: str = "localhost:8000", path: str = "/ws/fleet/"):
    cookie = await database_sync_to_async(_operator_cookie)()
    headers = [(b"host", host.encode()), (b"cookie", cookie)]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await comm.connect(timeout=10)
    if connected:
        await comm.disconnect()
    return connected


@pytest.mark.asyncio
async def test_the_dashboards_own_origin_is_accepted():
    assert await _connect(origin="http://localhost:8000")


@pytest.mark.parametrize("origin", [
    "http://localhost:9999",  # another app on the same host (AllowedHostsOriginValidator let this through)
    "http://localhost",  # port 80 is another origin
    "https://localhost:8000",  # another scheme
    "http://evil.example:8000",
    "null",
    "",
    None,
])
@pytest.mark.asyncio
async def test_any_other_origin_is_refused(origin):
    assert not await _connect(origin=origin)


@pytest.mark.asyncio
async def test_a_host_outside_allowed_hosts_is_refused_even_with_a_matching_origin():
    assert not await _connect(origin="http://evil.example:8000", host="evil.example:8000")


@pytest.mark.asyncio
async def test_an_origin_listed_in_csrf_trusted_origins_is_accepted(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://dashboard.example"]  # a TLS proxy's public origin
    assert await _connect(origin="https://dashboard.example", host="127.0.0.1:8001")


@pytest.mark.asyncio
async def test_an_unknown_route_is_refused_without_a_traceback(caplog):
    caplog.set_level(logging.DEBUG)
    for path in ("/ws/nope/", "/ws/sessions/abc/", "/", "/admin/"):
        assert not await _connect(origin="http://localhost:8000", path=path)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_origins_are_compared_after_normalising_default_ports_and_case():
    assert normalise_origin("HTTP://LocalHost:80") == "http://localhost"
    assert normalise_origin("https://a.example:443/") == "https://a.example"
    assert normalise_origin("http://[::1]:8000") == "http://[::1]:8000"
    assert normalise_origin("http://a.example/path") is None
    assert normalise_origin("javascript:alert(1)") is None
    assert origin_allowed(origin="http://localhost", host="localhost:80", scheme="ws")
    assert origin_allowed(origin="https://localhost:8443", host="localhost:8443", scheme="wss")
    assert not origin_allowed(origin="http://localhost:8443", host="localhost:8443", scheme="wss")
