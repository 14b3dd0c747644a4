"""The pages on Django's own tools: one safe-redirect rule, Forms for query strings and POSTs, get_object_or_404,
and the role from a context processor."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory

from compactweb.context_processors import role
from sessions_app.web.shortcuts import safe_next


@pytest.fixture
def support_client(client, support_user):
    client.force_login(support_user)
    return client


@pytest.mark.parametrize("target", ["https://evil.example/steal", "//evil.example/", "javascript:alert(1)"])
def test_next_pointing_off_site_falls_back(target):
    request = RequestFactory().post("/x/", {"next": target})
    assert safe_next(request, "/fallback/") == "/fallback/"


def test_next_on_this_site_is_followed():
    request = RequestFactory().post("/x/", {"next": "/sessions/3/"})
    assert safe_next(request, "/fallback/") == "/sessions/3/"


def test_the_rollback_form_never_redirects_off_site(support_client, make_session, add_turn, compact):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    response = support_client.post(f"/compactions/{compaction.pk}/rollback/",
                                   {"reason": "r", "next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == f"/compactions/{compaction.pk}/"


def test_unknown_rows_are_404_pages(support_client, db):
    assert support_client.get("/compactions/987654/rollback/").status_code == 404
    assert support_client.get("/sessions/987654/").status_code in (403, 404)


def test_a_malformed_audit_filter_filters_nothing_instead_of_failing(support_client, db):
    response = support_client.get("/audit/?session=abc&action=nonsense")
    assert response.status_code == 200


def test_the_role_reaches_every_template_through_the_context_processor(operator_user, support_user):
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    assert role(request) == {"role": None, "sso_enabled": False}
    request.user = operator_user
    assert role(request) == {"role": "operator", "sso_enabled": False}
    request.user = support_user
    assert role(request) == {"role": "support", "sso_enabled": False}
