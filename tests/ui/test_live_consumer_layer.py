"""The live consumers against a failing or forgetful channel layer: a layer that does not answer (Redis down) closes
the connection with 4013 ("try again later", the twin of 1013 that Daphne can send) instead of an HTTP 500 at the
handshake, memberships are refreshed so a
live page outlives the layer's group expiry, and a closed page leaves its groups."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import channel_layers, get_channel_layer
from redis.exceptions import ConnectionError as RedisConnectionError

from sessions_app.live.consumers import CLOSE_TRY_AGAIN
from sessions_app.rollout.events import FLEET_GROUP, publish_transient, session_group

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def refuse(*args, **kwargs):
    raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


@pytest.fixture
def layer():
    return get_channel_layer()


@pytest.mark.parametrize("path", ["/ws/fleet/", "/ws/sessions/{id}/"])
async def test_a_handshake_while_the_layer_is_down_is_closed_with_try_again(
    ws_for, operator_user, session, layer, monkeypatch, path
):
    monkeypatch.setattr(layer, "group_add", refuse)
    comm = await ws_for(operator_user, path.format(id=session.pk))
    ok, _ = await comm.connect(timeout=10)
    assert ok  # accepted, so the browser gets the code rather than a failed handshake
    assert await comm.receive_output(10) == {"type": "websocket.close", "code": CLOSE_TRY_AGAIN}


async def test_an_open_page_whose_layer_fails_is_closed_with_try_again(ws_for, operator_user, session, layer,
                                                                       monkeypatch):
    redis_goes_away = asyncio.Event()
    receive = layer.receive

    async def receive_until_redis_goes_away(channel):
        message = asyncio.ensure_future(receive(channel))
        gone = asyncio.ensure_future(redis_goes_away.wait())
        done, _ = await asyncio.wait({message, gone}, return_when=asyncio.FIRST_COMPLETED)
        if message in done:
            gone.cancel()
            return message.result()
        message.cancel()
        await refuse()

    monkeypatch.setattr(layer, "receive", receive_until_redis_goes_away)
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    ok, _ = await comm.connect(timeout=10)
    assert ok
    assert "hello" in (await comm.receive_output(10))["text"]

    redis_goes_away.set()

    assert await comm.receive_output(10) == {"type": "websocket.close", "code": CLOSE_TRY_AGAIN}


async def test_a_live_page_stays_in_its_group_past_the_group_expiry(ws_for, operator_user, session, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer",
                                           "CONFIG": {"group_expiry": 1}}}
    channel_layers.backends.clear()
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    ok, _ = await comm.connect(timeout=10)
    assert ok
    assert "hello" in (await comm.receive_output(10))["text"]
    await asyncio.sleep(2.5)  # more than twice the expiry: only the consumer's refresh keeps it a member

    await asyncio.get_running_loop().run_in_executor(None, lambda: publish_transient(
        session_id=session.pk, after_seq=0, kind="compaction.started", detail={}))

    assert "live-transient" in (await comm.receive_output(10))["text"]
    await comm.disconnect()


async def test_a_closed_page_leaves_its_groups(ws_for, operator_user, session, settings):
    # Group membership is read from the in-memory layer's own table; tests/scale_out covers the same on Redis
    # (a killed web process's channels leave the groups within the expiry).
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    layer = get_channel_layer()
    pages = [await ws_for(operator_user, f"/ws/sessions/{session.pk}/"), await ws_for(operator_user, "/ws/fleet/")]
    for page in pages:
        ok, _ = await page.connect(timeout=10)
        assert ok
    assert "hello" in (await pages[0].receive_output(10))["text"]
    assert len(layer.groups[session_group(session.pk)]) == 1 and len(layer.groups[FLEET_GROUP]) == 1

    for page in pages:
        await page.disconnect()

    assert not layer.groups.get(session_group(session.pk)) and not layer.groups.get(FLEET_GROUP)


@pytest.mark.parametrize("path", ["/ws/fleet/", "/ws/sessions/{id}/"])
async def test_a_connection_refused_for_its_role_leaves_no_membership_behind(ws_for, norole_user, session, settings,
                                                                             path):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    layer = get_channel_layer()
    comm = await ws_for(norole_user, path.format(id=session.pk))
    ok, _ = await comm.connect(timeout=10)
    assert ok
    assert await comm.receive_output(10) == {"type": "websocket.close", "code": 4403}

    assert not layer.groups.get(session_group(session.pk)) and not layer.groups.get(FLEET_GROUP)
    await comm.disconnect()


@pytest.mark.parametrize("path", ["/ws/fleet/", "/ws/sessions/{id}/"])
async def test_a_connect_is_one_read_on_the_connect_pool(ws_for, operator_user, session, monkeypatch, path):
    # The user lookup, the role check and the first read share one hop (one database connection): a burst of
    # connects no longer queues three hops each behind one another (docs/benchmarks.md, connect bursts).
    from sessions_app.live import consumers

    hops = []
    submit = consumers._connect_pool.executor.submit
    monkeypatch.setattr(consumers._connect_pool.executor, "submit", lambda fn, *a, **k: hops.append(fn) or submit(fn, *a, **k))
    comm = await ws_for(operator_user, path.format(id=session.pk))
    ok, _ = await comm.connect(timeout=10)
    assert ok
    if "sessions" in path:
        assert "hello" in (await comm.receive_output(10))["text"]

    assert len(hops) == 1
    await comm.disconnect()


async def test_a_forged_session_cookie_is_closed_as_anonymous(session, settings):
    from channels.testing import WebsocketCommunicator

    from compactweb.asgi import application
    from tests.ui.conftest import HOST, ORIGIN

    comm = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/",
                                 headers=[ORIGIN, HOST, (b"cookie", b"sessionid=0123456789abcdefghijklmnopqrstuv")])
    ok, _ = await comm.connect(timeout=10)
    assert ok
    assert await comm.receive_output(10) == {"type": "websocket.close", "code": 4401}


async def cancel_a_consumer_receiving_from(layer_receive, *, layer_down: bool = False, timeout: float = 5):
    """Start a session consumer's layer receive on `layer_receive`, cancel it, and return the receive's task once
    it ended (None when it still runs after `timeout`)."""
    from sessions_app.live.consumers import SessionConsumer

    consumer = SessionConsumer()
    consumer.layer_down = layer_down
    consumer.channel_receive = layer_receive
    receiving = asyncio.ensure_future(consumer.channel_receive())
    await asyncio.sleep(0)
    receiving.cancel()
    done, _ = await asyncio.wait({receiving}, timeout=timeout)
    return receiving if done else None


@pytest.mark.parametrize("layer_already_down", [False, True])
async def test_a_consumer_whose_layer_turns_its_cancellation_into_an_error_still_ends(layer_already_down):
    # redis-py may answer the cancellation of a blocked read with a connection error: the consumer must end anyway,
    # or a closing event loop (a server's shutdown, a test's teardown) waits for it forever.
    async def blocked_read_cancelled_as_an_error():
        try:
            await asyncio.Future()
        except asyncio.CancelledError:
            raise RedisConnectionError("Connection closed by server.") from None

    receiving = await cancel_a_consumer_receiving_from(blocked_read_cancelled_as_an_error,
                                                       layer_down=layer_already_down)

    assert receiving is not None, "the receive kept waiting after its task was cancelled"
    assert receiving.cancelled()


async def test_a_consumer_whose_layer_loses_one_cancellation_still_ends():
    # redis-py can retry a blocking read after a cancellation it turned into a connection error, as if nothing
    # happened: the consumer cancels again until the receive ends.
    cancellations = []

    async def read_that_loses_the_first_cancellation():
        while True:
            try:
                await asyncio.Future()
            except asyncio.CancelledError:
                cancellations.append(1)
                if len(cancellations) > 1:
                    raise

    receiving = await cancel_a_consumer_receiving_from(read_that_loses_the_first_cancellation)

    assert receiving is not None, "the receive kept waiting after its task was cancelled"
    assert receiving.cancelled() and len(cancellations) == 2


@pytest.fixture
def short_expiry_layer(settings):
    """The in-memory layer with a short group expiry: a membership refresher (every third of it) that a failed
    handshake left running would re-join within 0.1 s."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer",
                                           "CONFIG": {"group_expiry": 0.3}}}
    channel_layers.backends.clear()
    return get_channel_layer()


def _failing_user_lookup(monkeypatch, error: Exception) -> None:
    from compactweb import ws_auth

    def fail(scope):
        raise error

    monkeypatch.setattr(ws_auth, "resolve_user", fail)


@pytest.mark.parametrize("path", ["/ws/fleet/", "/ws/sessions/{id}/"])
async def test_a_handshake_while_the_database_is_down_is_closed_with_try_again_and_leaves_no_membership(
    ws_for, operator_user, session, short_expiry_layer, monkeypatch, path
):
    from django.db import OperationalError

    _failing_user_lookup(monkeypatch, OperationalError("server closed the connection unexpectedly"))
    comm = await ws_for(operator_user, path.format(id=session.pk))
    ok, _ = await comm.connect(timeout=10)
    assert ok  # accepted and closed: no HTTP 500 at the handshake
    assert await comm.receive_output(10) == {"type": "websocket.close", "code": CLOSE_TRY_AGAIN}

    groups = short_expiry_layer.groups
    assert not groups.get(session_group(session.pk)) and not groups.get(FLEET_GROUP)
    await asyncio.sleep(0.5)  # several refresh intervals
    assert not groups.get(session_group(session.pk)) and not groups.get(FLEET_GROUP)
    await comm.disconnect()


async def test_a_handshake_failing_for_another_reason_still_leaves_no_membership(
    ws_for, operator_user, session, short_expiry_layer, monkeypatch
):
    _failing_user_lookup(monkeypatch, ValueError("a bug"))
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    with pytest.raises(ValueError):
        await comm.connect(timeout=10)

    await asyncio.sleep(0.5)
    assert not short_expiry_layer.groups.get(session_group(session.pk))
