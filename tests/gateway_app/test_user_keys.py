"""Issue 29: a user's own gateway key (created on their keys page, shown once, stored hashed) works, as that user,
on the routes that allow user keys, named in the path; nowhere else."""

from __future__ import annotations

import re

import pytest

from gateway_app.keys import digest_of
from gateway_app.models import GatewayKey, GatewaySession
from tests.gateway_app.conftest import call, make_route
from tests.gateway_app.test_proxy import BASE, meta, user

pytestmark = pytest.mark.django_db(transaction=True)


def _create_key(client, name="laptop") -> str:
    response = client.post("/gateway-keys/", {"name": name})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    return re.search(r"(cwg_[A-Za-z0-9_-]+)", response.content.decode()).group(1)


def _post(path: str, key: str, thread: str = "0190eeee-0000-7000-8000-000000000001"):
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("please fix parser bug 3")]}
    return call("POST", path, json=body, headers={"Authorization": f"Bearer {key}", **meta(thread)})


def test_a_users_key_is_shown_once_stored_hashed_and_works_on_routes_that_allow_it(sim_upstream, client,
                                                                                     operator_user):
    open_route = make_route(rpm=601)
    open_route.allow_user_keys = True
    open_route.save()
    closed = make_route(rpm=602)
    client.force_login(operator_user)
    key = _create_key(client)
    row = GatewayKey.objects.get(user=operator_user)
    assert row.digest == digest_of(key) and key not in str(list(GatewayKey.objects.values()))
    page = client.get("/gateway-keys/").content.decode()
    assert key not in page and row.prefix in page and f"/gateway/r/{open_route.name}/v1" in page
    assert closed.name not in page

    response = _post(f"/gateway/r/{open_route.name}/v1/responses", key)
    assert response.status_code == 200
    gs = GatewaySession.objects.get()
    assert gs.route == open_route and gs.client_name == f"{operator_user.username} (laptop)"
    for path in (f"/gateway/r/{closed.name}/v1/responses", "/gateway/v1/responses",
                 "/gateway/r/no-such-route/v1/responses"):
        refused = _post(path, key, thread="0190eeee-0000-7000-8000-000000000002")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"


def test_a_revoked_key_or_a_user_without_a_role_is_refused(sim_upstream, client, make_user):
    route = make_route()
    route.allow_user_keys = True
    route.save()
    alice = make_user("operator", username="alice")
    client.force_login(alice)
    key = _create_key(client)
    row = GatewayKey.objects.get(user=alice)
    client.force_login(make_user("operator", username="mallory"))
    assert client.post(f"/gateway-keys/{row.pk}/revoke/").status_code == 404  # not mallory's key
    assert not GatewayKey.objects.get(pk=row.pk).revoked
    alice.groups.clear()  # alice lost her role
    assert _post(f"/gateway/r/{route.name}/v1/responses", key).status_code == 401
    client.force_login(alice)
    assert client.get("/gateway-keys/").status_code in (302, 403)


def test_a_routes_key_works_under_its_own_route_name_only(sim_upstream, gateway_key, route):
    assert _post(f"/gateway/r/{route.name}/v1/responses", gateway_key).status_code == 200
    other = make_route(rpm=5)
    assert _post(f"/gateway/r/{other.name}/v1/responses", gateway_key).status_code == 401


def test_the_keys_page_needs_a_role_and_refuses_an_empty_name(client, make_user):
    assert client.get("/gateway-keys/").status_code == 302  # anonymous: to the login page
    client.force_login(make_user(role=None))
    assert client.get("/gateway-keys/").status_code in (302, 403)
    assert client.post("/gateway-keys/", {"name": "x"}).status_code in (302, 403)
    assert not GatewayKey.objects.exists()
    client.force_login(make_user("operator", username="op"))
    assert client.post("/gateway-keys/", {"name": "  "}).status_code == 400
    assert not GatewayKey.objects.exists()


def test_a_user_revokes_their_own_key_on_the_keys_page_and_the_gateway_refuses_it(sim_upstream, client, make_user,
                                                                                   settings):
    settings.COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS = 0  # no process remembers the key past the revocation
    route = make_route()
    route.allow_user_keys = True
    route.save()
    alice = make_user("operator", username="alice")
    client.force_login(alice)
    kept, revoked = _create_key(client, name="desktop"), _create_key(client, name="laptop")
    assert _post(f"/gateway/r/{route.name}/v1/responses", revoked).status_code == 200
    row = GatewayKey.objects.get(user=alice, client_name="laptop")

    assert client.post(f"/gateway-keys/{row.pk}/revoke/").status_code == 302

    assert GatewayKey.objects.get(pk=row.pk).revoked and not GatewayKey.objects.get(client_name="desktop").revoked
    refused = _post(f"/gateway/r/{route.name}/v1/responses", revoked, thread="0190eeee-0000-7000-8000-000000000003")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    assert _post(f"/gateway/r/{route.name}/v1/responses", kept,
                 thread="0190eeee-0000-7000-8000-000000000004").status_code == 200


def test_the_keys_page_names_only_the_enabled_routes_that_allow_user_keys(client, operator_user):
    shown, disabled = make_route(rpm=603), make_route(rpm=604)
    for route, enabled in ((shown, True), (disabled, False)):
        route.allow_user_keys, route.enabled = True, enabled
        route.save()
    client.force_login(operator_user)
    page = client.get("/gateway-keys/").content.decode()
    assert f"/gateway/r/{shown.name}/v1" in page and disabled.name not in page


def test_a_users_key_is_refused_on_a_disabled_route_that_allows_user_keys(sim_upstream, client, operator_user):
    route = make_route(rpm=605)
    route.allow_user_keys, route.enabled = True, False
    route.save()
    client.force_login(operator_user)
    refused = _post(f"/gateway/r/{route.name}/v1/responses", _create_key(client))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"


def test_a_user_keys_route_is_read_with_its_provider_and_policy_in_one_query(django_assert_num_queries):
    """The key lookup runs on the gateway's one lookup thread, a single indexed query per read (gateway_app.lookups):
    the route a user's key names comes with what the caller is built from."""
    from gateway_app.keys import user_key_route

    route = make_route(rpm=606)
    route.allow_user_keys = True
    route.save()
    with django_assert_num_queries(1):
        found = user_key_route(name=route.name)
        assert (found.provider.name, found.policy.name) == (route.provider.name, route.policy.name)


def test_a_users_key_is_read_with_its_user_in_one_query(django_assert_num_queries, operator_user):
    """The caller of a user's key is named after its user (and the user's role read from it): the lookup's one
    query brings the user with the key."""
    from gateway_app.keys import do_create_user_gateway_key, key_for

    key = do_create_user_gateway_key(user=operator_user, name="laptop").key
    with django_assert_num_queries(1):
        row = key_for(presented=key)
        assert (row.user.get_username(), row.user.is_active) == (operator_user.get_username(), True)


def test_the_key_of_a_user_made_inactive_is_not_found(operator_user):
    from gateway_app.keys import do_create_user_gateway_key, key_for

    key = do_create_user_gateway_key(user=operator_user, name="laptop").key
    assert key_for(presented=key) is not None
    operator_user.is_active = False
    operator_user.save()
    assert key_for(presented=key) is None
