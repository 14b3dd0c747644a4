"""Issue 29: a route's requests per minute are counted across every dashboard process (Redis when the deployment
has one, else each process's count shared through the database), not in one process's memory alone."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync

from gateway_app import limits
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayRateCount
from tests.gateway_app.conftest import call, make_route

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 29_000_000  # a fixed minute: the test does not depend on the clock


@pytest.fixture
def fixed_minute(monkeypatch, settings):
    settings.REDIS_URL = None  # the embedded default: counts shared through the database
    monkeypatch.setattr(limits, "window_now", lambda: WINDOW)
    monkeypatch.setattr(limits, "_counts", limits._Counts())


def _models(key):
    response = call("GET", "/gateway/v1/models", headers={"Authorization": f"Bearer {key}"})
    limits.wait_for_syncs()
    return response


def test_the_rate_limit_counts_what_other_processes_served(sim_upstream, fixed_minute, monkeypatch):
    route = make_route(rpm=3)
    key = do_create_gateway_key(route=route, client_name="ci").key
    # Another dashboard process served two requests of this route this minute and shared its count.
    limits.do_sync_count(route_id=route.pk, window=WINDOW, process="other-process", count=2)
    assert _models(key).status_code == 200  # this process's first request reads the others' count
    monkeypatch.setattr(limits, "SYNC_SECONDS", 0.0)
    response = _models(key)
    assert response.status_code == 429  # 2 there + 2 here > 3
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    assert 1 <= int(response.headers["retry-after"]) <= 60
    counts = dict(GatewayRateCount.objects.filter(route=route, window=WINDOW).values_list("process", "count"))
    assert counts == {"other-process": 2, limits.PROCESS: 2}


def test_within_one_process_the_limit_holds_without_waiting_for_a_sync(sim_upstream, fixed_minute):
    route = make_route(rpm=2)
    key = do_create_gateway_key(route=route, client_name="ci").key
    assert [_models(key).status_code for _ in range(3)] == [200, 200, 429]


def test_a_new_minute_drops_the_counts_of_old_ones(db):
    route = make_route(rpm=1)
    for window in (100, 101, 102):
        assert limits.do_sync_count(route_id=route.pk, window=window, process="p", count=1) == 0
    assert set(GatewayRateCount.objects.values_list("window", flat=True)) == {101, 102}


def test_with_redis_every_process_counts_in_one_place(sim_upstream, settings, redis_url, monkeypatch):
    settings.REDIS_URL = redis_url
    monkeypatch.setattr(limits, "REDIS_PREFIX", f"test-gateway-rpm-{uuid.uuid4().hex[:8]}")
    monkeypatch.setattr(limits, "window_now", lambda: WINDOW)
    route = make_route(rpm=2)

    async def taken_elsewhere():
        return await limits._take_in_redis(route.pk, WINDOW)

    assert async_to_sync(taken_elsewhere)() == 1  # another process's request of this route, this minute
    key = do_create_gateway_key(route=route, client_name="ci").key
    assert [_models(key).status_code for _ in range(2)] == [200, 429]
