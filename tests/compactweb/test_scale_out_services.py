"""Scale-out backends answer (service-backed: skipped with a reason outside CI when absent, failing under CI)."""

import asyncio

import pytest


@pytest.mark.services
def test_the_redis_channel_layer_carries_a_message(redis_url):
    from channels_redis.core import RedisChannelLayer

    async def round_trip():
        layer = RedisChannelLayer(hosts=[redis_url])
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "session.event", "seq": 7})
        message = await asyncio.wait_for(layer.receive(channel), timeout=5)
        await layer.flush()
        return message

    assert asyncio.run(round_trip()) == {"type": "session.event", "seq": 7}


@pytest.mark.services
def test_postgresql_accepts_connections(postgres_url):
    from urllib.parse import urlsplit

    import psycopg

    # the maintenance database: the test database itself may not exist yet, whatever DATABASE_URL names it
    with psycopg.connect(urlsplit(postgres_url)._replace(path="/postgres").geturl(), connect_timeout=3) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
