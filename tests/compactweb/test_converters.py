"""Row ids past 64 bits are a 404 or a 400, never a 500 (issue 27): SQLite's driver overflows on 2**63 where
PostgreSQL answers "no such row". Every `<id:...>` route of the pages and the API is tried with 2**63 and a
30-digit number, by a superuser (so no role check answers first), and so are the ids the API and pages read from
a query or a body."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from compactweb.converters import MAX_ID

HUGE = [str(MAX_ID + 1), "9" * 30]


def _routes(patterns, prefix: str = "") -> list[str]:
    found = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            found += _routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and "<id:" in str(entry.pattern):
            found.append(prefix + str(entry.pattern))
    return found


ROUTES = _routes(get_resolver().url_patterns)


def test_every_numeric_route_uses_the_bounded_converter():
    assert len(ROUTES) >= 30
    everything = _all(get_resolver().url_patterns)
    assert not [route for route in everything if "<int:" in route]


def _all(patterns, prefix: str = "") -> list[str]:
    out = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            out += _all(entry.url_patterns, prefix + str(entry.pattern))
        else:
            out.append(prefix + str(entry.pattern))
    return out


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("method", ["get", "post"])
def test_a_route_with_an_id_past_64_bits_is_a_404(admin_client, route, method):
    for huge in HUGE:
        url = "/" + re.sub(r"<id:\w+>", huge, route).replace("<str:action>", "pause").replace("<str:pin_id>", "p")
        response = getattr(admin_client, method)(url)
        assert response.status_code == 404, (url, response.status_code)


def test_the_largest_id_is_an_ordinary_404(admin_client):
    assert admin_client.get(f"/api/v1/sessions/{MAX_ID}").status_code == 404
    assert admin_client.get(f"/sessions/{MAX_ID}/").status_code == 404


def test_ids_past_64_bits_in_a_query_or_body_are_not_a_500(admin_client, session, provider, policy):
    for huge in HUGE:
        rollout = admin_client.get(f"/api/v1/sessions/{session.pk}/rollout?after={huge}")
        assert rollout.status_code == 400 and rollout.json()["error"]["code"] == "invalid"
        for url in (f"/audit/?session={huge}",
                    f"/analytics/?policy={huge}&provider={huge}", f"/?provider={huge}&policy={huge}",
                    f"/fleet/rows/?provider={huge}", f"/audit/?page={huge}"):
            response = admin_client.get(url)
            assert response.status_code < 500, (url, response.status_code)
        created = admin_client.post("/api/v1/sessions", {"title": "t", "provider": int(huge), "policy": policy.pk},
                                    content_type="application/json")
        assert created.status_code == 400, created.content
        created = admin_client.post("/api/v1/sessions", {"title": "t", "provider": provider.pk, "policy": int(huge)},
                                    content_type="application/json")
        assert created.status_code == 400, created.content
