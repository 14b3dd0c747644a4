"""Role checks on every API endpoint: anonymous 401, wrong role 403, the right role gets through (design: roles)."""

import json

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from compactweb.roles import ADMIN, OPERATOR, ROLES

ROLE_ORDER = [None, *ROLES]  # None = an authenticated user in no role group


def _endpoints(provider, policy, session):
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    return [
        ("get", "/api/v1/openapi.json", OPERATOR, None),
        ("get", "/api/v1/providers", OPERATOR, None),
        ("post", "/api/v1/providers", ADMIN, {"name": "p-new", "base_url": "embedded", "model": "sim-1"}),
        ("get", f"/api/v1/providers/{provider.pk}", OPERATOR, None),
        ("patch", f"/api/v1/providers/{provider.pk}", ADMIN, {"context_window": 64000}),
        ("get", "/api/v1/policies", OPERATOR, None),
        ("post", "/api/v1/policies", ADMIN, {"name": "pol-new"}),
        ("get", f"/api/v1/policies/{policy.pk}", OPERATOR, None),
        ("patch", f"/api/v1/policies/{policy.pk}", ADMIN, {"auto_compact_token_limit": 20000}),
        ("get", "/api/v1/sessions", OPERATOR, None),
        ("post", "/api/v1/sessions", OPERATOR, {"title": "s", "provider": provider.pk, "policy": policy.pk}),
        ("get", f"/api/v1/sessions/{session.pk}", OPERATOR, None),
        ("get", f"/api/v1/sessions/{session.pk}/history", OPERATOR, None),
        ("post", f"/api/v1/sessions/{session.pk}/items", OPERATOR, {"items": [item]}),
        ("get", f"/api/v1/sessions/{session.pk}/rollout", OPERATOR, None),
        ("get", "/api/v1/archives", ADMIN, None),
    ]


ENDPOINT_COUNT = 16


@pytest.fixture
def endpoints(provider, policy, session):
    found = _endpoints(provider, policy, session)
    assert len(found) == ENDPOINT_COUNT
    return found


@pytest.mark.parametrize("index", range(ENDPOINT_COUNT))
def test_anonymous_requests_get_401_with_a_token_challenge(anon_api, endpoints, index):
    method, url, _, body = endpoints[index]
    response = getattr(anon_api, method)(url, body, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert json.loads(response.content)["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("index", range(ENDPOINT_COUNT))
@pytest.mark.parametrize("role", ROLE_ORDER)
def test_each_role_is_refused_below_and_served_at_or_above_the_required_role(
    make_user, api_client_for, endpoints, index, role
):
    method, url, required, body = endpoints[index]
    client = api_client_for(make_user(role))
    response = getattr(client, method)(url, body, format="json")
    allowed = role is not None and ROLE_ORDER.index(role) >= ROLE_ORDER.index(required)
    if allowed:
        assert 200 <= response.status_code < 300, response.content[:300]
    else:
        assert response.status_code == 403
        assert json.loads(response.content)["error"]["code"] == "permission_denied"


def test_superusers_hold_every_role(admin_user, api_client_for, provider):
    response = api_client_for(admin_user).patch(f"/api/v1/providers/{provider.pk}", {"model": "sim-2"}, format="json")
    assert response.status_code == 200


def _api_views(resolver=None, prefix=""):
    for pattern in (resolver or get_resolver()).url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _api_views(pattern, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            yield route, getattr(pattern.callback, "cls", None)


def test_every_api_view_declares_a_role_permission():
    """Guards routes added later too: the global default (any authenticated user) is never enough."""
    from rest_framework.permissions import BasePermission

    from compactweb import roles

    role_classes = (roles.IsOperator, roles.IsSupport, roles.IsAdminRole, roles.ReadOperatorWriteAdmin)
    missing = []
    for route, view in _api_views():
        if view is None:
            missing.append(route)
            continue
        perms = getattr(view, "permission_classes", None)
        if route.endswith("openapi.json"):
            from django.conf import settings

            assert settings.SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"] == ["compactweb.roles.IsOperator"]
            continue
        if not perms or not all(isinstance(p, type) and issubclass(p, BasePermission) for p in perms):
            missing.append(route)
        elif not any(issubclass(p, role_classes) for p in perms):
            missing.append(route)
    assert missing == []
