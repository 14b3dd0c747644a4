"""A user's own API tokens page (issue 45): a token minted there is shown once, works on the API, is stored as a
digest only, and stops working when revoked there; nobody revokes another's token, and the page checks the role."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api_status(token: str) -> int:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api.get("/api/v1/alerts").status_code


@pytest.mark.django_db
def test_a_user_mints_a_token_shown_once_that_works_and_revokes_it_on_their_page(operator_user):
    client = _client(operator_user)
    minted = client.post("/api-tokens/")
    assert minted.status_code == 200 and minted["Cache-Control"] == "no-store"
    token = re.search(r'id="new-api-token".*?<code>([^<]+)</code>', minted.content.decode(), re.S).group(1)
    assert _api_status(token) == 200

    (row,) = AuthToken.objects.filter(user=operator_user)
    assert token not in (row.digest, row.token_key) and token.startswith(row.token_key)  # a digest at rest
    page = client.get("/api-tokens/").content.decode()
    assert token not in page and f"<code>{row.token_key}…</code>" in page  # never shown again

    answer = client.post(f"/api-tokens/{row.token_key}/revoke/", follow=True)
    assert "Revoked: the token no longer works." in answer.content.decode()
    assert _api_status(token) == 401
    assert not AuthToken.objects.filter(user=operator_user).exists()


@pytest.mark.django_db
def test_nobody_revokes_another_users_token_and_the_page_checks_the_role(operator_user, make_user):
    page = _client(operator_user).post("/api-tokens/").content.decode()
    token = re.search(r'id="new-api-token".*?<code>([^<]+)</code>', page, re.S).group(1)
    key = AuthToken.objects.get(user=operator_user).token_key
    other = _client(make_user("operator"))
    assert other.post(f"/api-tokens/{key}/revoke/").status_code == 404
    assert _api_status(token) == 200
    assert key not in other.get("/api-tokens/").content.decode()

    assert _client(make_user(None)).get("/api-tokens/").status_code == 403
    assert _client(make_user(None)).post("/api-tokens/").status_code == 403
    assert not AuthToken.objects.filter(user__groups__isnull=True).exists()
    anonymous = Client().get("/api-tokens/")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert _client(operator_user).get(f"/api-tokens/{key}/revoke/").status_code == 405
