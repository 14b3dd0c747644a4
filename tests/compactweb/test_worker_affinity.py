"""Which worker a session's steps go to (issue 34): rendezvous hashing over the live workers, and the heartbeats
that say which workers live."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest

from compactweb import worker_affinity
from compactweb.worker_affinity import rendezvous

SESSIONS = range(1, 401)


def owners(nodes: list[str]) -> dict[int, str | None]:
    return {session: rendezvous(session, nodes) for session in SESSIONS}


def test_a_session_always_goes_to_the_same_worker_whatever_the_order_of_the_list():
    nodes = ["w1@h", "w2@h", "w3@h", "w4@h"]
    assert owners(nodes) == owners(list(reversed(nodes)))
    assert set(owners(nodes).values()) == set(nodes)  # every worker gets a share


def test_removing_a_worker_moves_only_the_sessions_it_had():
    before = owners(["w1@h", "w2@h", "w3@h", "w4@h"])
    after = owners(["w1@h", "w2@h", "w4@h"])
    moved = {s for s in SESSIONS if before[s] != after[s]}
    assert moved == {s for s in SESSIONS if before[s] == "w3@h"}


def test_adding_a_worker_takes_only_sessions_it_wins():
    before = owners(["w1@h", "w2@h"])
    after = owners(["w1@h", "w2@h", "w3@h"])
    moved = {s for s in SESSIONS if before[s] != after[s]}
    assert moved and all(after[s] == "w3@h" for s in moved)


def test_with_no_worker_there_is_no_owner():
    assert rendezvous(7, []) is None


def test_affinity_needs_the_setting_and_a_redis_broker(settings):
    settings.COMPACTWEB_STEP_AFFINITY = True
    settings.CELERY_BROKER_URL = None
    assert not worker_affinity.enabled()  # the embedded default: tasks run in-process
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/3"
    assert worker_affinity.enabled()
    settings.COMPACTWEB_STEP_AFFINITY = False
    assert not worker_affinity.enabled()


def test_a_workers_queue_is_celerys_worker_direct_queue():
    from celery.utils.nodenames import worker_direct

    assert worker_affinity.queue_of("w1@h") == worker_direct("w1@h")


@pytest.fixture
def registry(redis_url, settings):
    import redis

    settings.CELERY_BROKER_URL = redis_url
    client = redis.Redis.from_url(redis_url)
    yield worker_affinity.Registry(client)
    client.close()


@pytest.fixture
def names():
    """Worker names of this test only (the Redis database may hold other workers' heartbeats)."""
    tag = uuid.uuid4().hex[:8]
    return [f"w{i}-{tag}@h" for i in range(3)]


@pytest.mark.services
def test_a_worker_lives_while_it_beats_and_is_dead_when_its_heartbeat_expires(registry, names):
    w1, w2, _ = names
    registry.beat(w1, ttl=60)
    registry.beat(w2, ttl=0.2)
    assert {w1, w2} <= set(registry.live())
    time.sleep(0.4)
    live = registry.live()
    assert w1 in live and w2 not in live
    assert w2.encode() not in registry.client.smembers(worker_affinity.MEMBERS_KEY)  # the dead one is forgotten
    registry.forget(w1)
    assert w1 not in registry.live()


@pytest.mark.services
def test_a_ready_worker_announces_itself_until_it_shuts_down(registry, names, settings):
    settings.COMPACTWEB_STEP_AFFINITY = True
    node = names[0]
    heartbeat = worker_affinity.start_heartbeat(sender=SimpleNamespace(hostname=node))
    try:
        deadline = time.monotonic() + 5
        while node not in registry.live():
            assert time.monotonic() < deadline, "the worker never announced itself"
            time.sleep(0.05)
        assert heartbeat.is_alive()
    finally:
        worker_affinity.stop_heartbeat()
    assert node not in registry.live()  # gone at once, not after its TTL
    assert not heartbeat.is_alive()


def test_a_worker_announces_nothing_with_affinity_off(settings):
    settings.COMPACTWEB_STEP_AFFINITY = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/3"
    assert worker_affinity.start_heartbeat(sender=SimpleNamespace(hostname="off@h")) is None
