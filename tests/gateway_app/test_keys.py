"""Issue 29: gateway keys are created by a management command (printed once) and by the admin; a key works only
for its own route, and only its digest is stored."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from gateway_app.keys import digest_of, key_for
from gateway_app.models import GatewayKey

pytestmark = pytest.mark.django_db


def test_the_command_prints_a_key_once_and_stores_its_digest(route):
    out = io.StringIO()
    call_command("create_gateway_key", "--route", route.name, "--client", "ci-runner-7", stdout=out)
    key = out.getvalue().strip()
    row = GatewayKey.objects.get()
    assert row.digest == digest_of(key) and row.client_name == "ci-runner-7" and key_for(presented=key) == row


def test_the_command_refuses_an_unknown_route(db):
    with pytest.raises(CommandError, match="no gateway route"):
        call_command("create_gateway_key", "--route", "nope", "--client", "x")


def test_a_key_of_a_disabled_route_is_refused(route):
    out = io.StringIO()
    call_command("create_gateway_key", "--route", route.name, "--client", "x", stdout=out)
    route.enabled = False
    route.save()
    assert key_for(presented=out.getvalue().strip()) is None


def test_the_admin_shows_a_new_key_once(route, admin_client):
    response = admin_client.post("/admin/gateway_app/gatewaykey/add/",
                                 {"route": route.pk, "client_name": "bob-laptop"}, follow=True)
    assert response.status_code == 200
    row = GatewayKey.objects.get()
    shown = [str(m) for m in response.context["messages"]]
    (text,) = [m for m in shown if "shown only now" in m]
    key = text.rsplit(" ", 1)[-1]
    assert digest_of(key) == row.digest and key not in str(list(GatewayKey.objects.values()))


@pytest.mark.django_db(transaction=True)
def test_authentication_never_waits_behind_a_write_and_last_used_follows(sim_upstream, route, monkeypatch):
    """The recorder holds the database's write lock (SQLite: one writer) while a new key authenticates: the
    request is authenticated and forwarded upstream while the lock is held, and the key's `last_used` is written
    once the recorder goes on. (The answer's end then waits for its journal row, durable-first: so the test lets
    the recorder go once the request is forwarded, rather than waiting out SQLite's busy timeout.)"""
    import asyncio
    import threading

    import httpx
    from asgiref.sync import async_to_sync

    from gateway_app import proxy, recording, upstream
    from gateway_app.keys import do_create_gateway_key
    from gateway_app.models import GatewayKey, GatewayRoute
    from tests.gateway_app.test_proxy import BASE, bearer, user
    from tests.gateway_app.test_upstream_client import _router

    release, holding = threading.Event(), threading.Event()
    real = recording.do_record_exchange

    def holding_the_write_lock(**kwargs):
        GatewayRoute.objects.filter(pk=route.pk).update(requests_per_minute=600)  # a write: the lock is taken
        holding.set()
        assert release.wait(60)
        return real(**kwargs)

    monkeypatch.setattr(recording, "do_record_exchange", holding_the_write_lock)
    forwarded, real_request = threading.Event(), upstream.request

    def noting_the_forward(*args, **kwargs):
        if holding.is_set():
            forwarded.set()
        return real_request(*args, **kwargs)

    monkeypatch.setattr(upstream, "request", noting_the_forward)
    first, second = (do_create_gateway_key(route=route, client_name=name).key for name in ("a", "b"))
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("hello")]}

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_router()), base_url="http://x") as client:
            assert (await client.post("/gateway/v1/responses", json=body, headers=bearer(first))).status_code == 200
            assert await asyncio.to_thread(holding.wait, 30)
            answering = asyncio.ensure_future(client.post("/gateway/v1/responses", json=body, headers=bearer(second)))
            assert await asyncio.to_thread(forwarded.wait, 30)  # authenticated and forwarded...
            assert not release.is_set()  # ...while the recorder still held the lock
            release.set()
            answered = await answering
        await proxy.drain()
        return answered

    assert async_to_sync(go)().status_code == 200
    assert GatewayKey.objects.filter(last_used__isnull=False).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_route_keys_caller_carries_its_routes_compaction_fallback(route):
    """The caller the key lookup builds says what the route does with a compaction its policy cannot make
    (compaction.run_policy_compaction reads it): forward it upstream here, not summarise."""
    from asgiref.sync import async_to_sync

    from gateway_app import proxy
    from gateway_app.keys import do_create_gateway_key
    from gateway_app.models import GatewayRoute

    route.compaction_fallback = GatewayRoute.Fallback.UPSTREAM
    route.save()
    key = do_create_gateway_key(route=route, client_name="ci").key
    proxy._keys.clear()
    caller = async_to_sync(proxy.authenticate)({"authorization": f"Bearer {key}"}, "", "127.0.0.1")
    assert caller.route_id == route.pk and caller.compaction_fallback == GatewayRoute.Fallback.UPSTREAM


@pytest.mark.django_db(transaction=True)
def test_a_revoked_key_stops_working_the_cache_time_after_its_lookup_began_however_long_the_lookup_took(
        route, monkeypatch):
    """A process remembers who a key is for COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS, counted from before the database
    read: a revocation committed while a slow lookup ran is seen that long after the read began, not later."""
    from asgiref.sync import async_to_sync

    from compaction_app.engine.lru import TtlLru
    from gateway_app import keys, proxy
    from gateway_app.keys import do_create_gateway_key

    clock = [100.0]
    monkeypatch.setattr(proxy, "_keys", TtlLru(10, seconds=lambda: 1.0, clock=lambda: clock[0]))
    real = keys.key_for

    def slow_lookup(*, presented):
        clock[0] += 0.8  # the read takes 0.8 s of the 1 s the answer may be remembered
        return real(presented=presented)

    monkeypatch.setattr(keys, "key_for", slow_lookup)
    key = do_create_gateway_key(route=route, client_name="ci").key
    headers = {"authorization": f"Bearer {key}"}
    assert async_to_sync(proxy.authenticate)(headers, "", "127.0.0.1") is not None  # read from 100.0 to 100.8
    GatewayKey.objects.update(revoked=True)
    clock[0] = 100.5  # within the second after the read began: still remembered
    assert async_to_sync(proxy.authenticate)(headers, "", "127.0.0.1") is not None
    clock[0] = 101.2  # over a second after the read began, though only 0.4 s after it ended
    assert async_to_sync(proxy.authenticate)(headers, "", "127.0.0.1") is None


def test_a_key_is_its_prefix_and_32_random_bytes_url_safe_and_its_client_name_is_cut_to_100(route):
    import re

    from gateway_app.keys import do_create_gateway_key

    first = do_create_gateway_key(route=route, client_name="c" * 150)
    second = do_create_gateway_key(route=route, client_name="ci")
    assert re.fullmatch(r"cwg_[A-Za-z0-9_-]{43}", first.key) and first.key != second.key
    assert GatewayKey.objects.get(pk=first.row.pk).client_name == "c" * 100


def test_a_routes_key_is_read_with_its_route_provider_and_policy_in_one_query(route, django_assert_num_queries):
    """The caller of a route's key is built from its route, the route's provider and policy (proxy._lookup): the
    lookup's one query brings them with the key."""
    from gateway_app.keys import do_create_gateway_key

    key = do_create_gateway_key(route=route, client_name="ci").key
    with django_assert_num_queries(1):
        row = key_for(presented=key)
        assert (row.route.name, row.route.provider.name, row.route.policy.name) == (
            route.name, route.provider.name, route.policy.name)
