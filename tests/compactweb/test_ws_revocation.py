"""Issue 27: an open websocket ends within seconds when its user loses the role, is deactivated, changes password,
logs out or is deleted (compactweb.ws_revocation), through a real communicator on the ASGI application; a change
made behind the ORM's back is caught by the periodic re-check."""

from __future__ import annotations

import time

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client

from compactweb.asgi import application
from compactweb.roles import ROLES
from sessions_app.live.consumers import CLOSE_ANONYMOUS, CLOSE_FORBIDDEN

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

HEADERS = [(b"host", b"localhost"), (b"origin", b"http://localhost")]
CLOSED_WITHIN_SECONDS = 5


@pytest.fixture(autouse=True)
def _in_memory_channel_layer(settings):
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _login(role: str = "operator") -> tuple[User, Client]:
    for name in ROLES:  # a transactional test's flush empties the groups the migration made
        Group.objects.get_or_create(name=name)
    user = User.objects.create_user(username=f"watcher-{role}", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return user, client


async def _watch(client: Client, path: str = "/ws/fleet/") -> WebsocketCommunicator:
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    comm = WebsocketCommunicator(application, path, headers=[*HEADERS, cookie])
    connected, _ = await comm.connect(timeout=10)
    assert connected
    assert await comm.receive_nothing(0.2)  # the fleet page sends nothing until a session changes
    return comm


async def _closed_with(comm: WebsocketCommunicator) -> tuple[int, float]:
    started = time.monotonic()
    message = await comm.receive_output(CLOSED_WITHIN_SECONDS)
    assert message["type"] == "websocket.close", message
    return message["code"], time.monotonic() - started


def _remove_role(user, client):
    user.groups.remove(Group.objects.get(name="operator"))


def _remove_from_the_group_side(user, client):
    Group.objects.get(name="operator").user_set.remove(user)


def _deactivate(user, client):
    user.is_active = False
    user.save()


def _change_password(user, client):
    user.set_password("a-brand-new-password-27")
    user.save()


def _log_out(user, client):
    client.logout()


def _delete(user, client):
    user.delete()


@pytest.mark.parametrize(("change", "code"), [
    (_remove_role, CLOSE_FORBIDDEN), (_remove_from_the_group_side, CLOSE_FORBIDDEN), (_deactivate, CLOSE_ANONYMOUS),
    (_change_password, CLOSE_ANONYMOUS), (_log_out, CLOSE_ANONYMOUS), (_delete, CLOSE_ANONYMOUS),
])
async def test_an_open_websocket_is_closed_within_seconds_when_access_is_taken_away(change, code):
    user, client = await database_sync_to_async(_login)()
    comm = await _watch(client)

    await database_sync_to_async(change)(user, client)

    closed, seconds = await _closed_with(comm)
    assert closed == code and seconds < CLOSED_WITHIN_SECONDS
    await comm.wait()


async def test_a_session_page_is_closed_too(session):
    user, client = await database_sync_to_async(_login)()
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    comm = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/", headers=[*HEADERS, cookie])
    assert (await comm.connect(timeout=10))[0]
    assert (await comm.receive_output(10))["type"] == "websocket.send"  # the page's first state

    await database_sync_to_async(_remove_role)(user, client)

    assert (await _closed_with(comm))[0] == CLOSE_FORBIDDEN


async def test_a_change_that_takes_nothing_away_keeps_the_socket_open():
    user, client = await database_sync_to_async(_login)()
    comm = await _watch(client)

    def rename():
        user.first_name = "Ada"
        user.save()
        user.groups.add(Group.objects.get(name="support"))  # a higher role still includes operator

    await database_sync_to_async(rename)()

    assert await comm.receive_nothing(1)
    await comm.disconnect()


async def test_a_change_behind_the_orms_back_is_caught_by_the_periodic_recheck(settings):
    settings.COMPACTWEB_WS_AUTH_RECHECK_SECONDS = 0.5
    user, client = await database_sync_to_async(_login)()
    comm = await _watch(client)

    def deactivate_by_sql():
        with connection.cursor() as cursor:  # no signal fires
            cursor.execute(f"UPDATE {User._meta.db_table} SET is_active = %s WHERE id = %s", [False, user.pk])

    await database_sync_to_async(deactivate_by_sql)()

    assert (await _closed_with(comm))[0] == CLOSE_ANONYMOUS


async def test_on_the_redis_layer_the_change_reaches_the_socket_too(settings, redis_url):
    """The deployment's layer: the signal is sent from the thread that saved the change, through Redis, to the
    consumer's group (any web process holding one of the user's sockets)."""
    import uuid

    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {
        "hosts": [redis_url], "prefix": f"test-ws-revocation-{uuid.uuid4().hex[:8]}"}}}
    channel_layers.backends.clear()
    user, client = await database_sync_to_async(_login)()
    comm = await _watch(client)

    await database_sync_to_async(_remove_role)(user, client)

    assert (await _closed_with(comm))[0] == CLOSE_FORBIDDEN
    await comm.wait()
