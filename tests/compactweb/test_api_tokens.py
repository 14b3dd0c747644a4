"""Issue 14: API tokens are stored hashed (django-rest-knox), shown once when issued, and old plain-text tokens
are hashed by a migration so they keep working while the plain-text table disappears."""

from __future__ import annotations

import importlib
import re
from datetime import UTC, datetime, timedelta
from io import StringIO
from types import SimpleNamespace

from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from compactweb import roles
from compactweb.api_tokens import HashedTokenAuthentication, issue_token, revoke_tokens, user_for_token


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _every_stored_value() -> str:
    rows = AuthToken.objects.values_list("digest", "token_key")
    return " ".join(value for row in rows for value in row)


def test_a_token_is_stored_only_as_a_digest_and_authenticates(make_user):
    user = make_user("operator")
    token = issue_token(user=user)
    assert len(token) == 64
    assert token not in _every_stored_value()  # a database copy yields no usable token
    assert _client(token).get("/api/v1/sessions").status_code == 200
    assert user_for_token(token) == user


def test_create_user_shows_the_token_once_and_stores_its_hash(db):
    out = StringIO()
    call_command("create_user", "--username", "ops", "--role", "operator", stdout=out)
    token = re.search(r"token: (\w+)", out.getvalue()).group(1)
    assert token not in _every_stored_value()
    assert _client(token).get("/api/v1/sessions").status_code == 200


def test_a_revoked_or_forged_token_is_refused_in_the_error_shape(make_user):
    user = make_user("operator")
    token = issue_token(user=user)
    forged = token[:15] + "0" * 49  # right lookup prefix, wrong secret
    response = _client(forged).get("/api/v1/sessions")
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    assert revoke_tokens(user=user) == 1
    assert _client(token).get("/api/v1/sessions").status_code == 401


def test_a_token_and_its_users_role_are_read_in_three_statements(make_user, django_assert_num_queries):
    user = make_user("support")
    token = issue_token(user=user)
    with django_assert_num_queries(3):  # the tokens with this key, the matching one's user, the user's role groups
        authenticated, auth_token = HashedTokenAuthentication().authenticate_credentials(token.encode())
        assert roles.role_of(authenticated) == roles.SUPPORT
    assert authenticated == user and auth_token.user_id == user.pk and auth_token.digest


def test_an_expired_token_is_refused_and_deleted(make_user):
    user = make_user("operator")
    token = issue_token(user=user)
    AuthToken.objects.filter(user=user).update(expiry=timezone.now() - timedelta(seconds=1))
    response = _client(token).get("/api/v1/sessions")
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    assert not AuthToken.objects.filter(user=user).exists()


def test_issuing_a_token_deletes_the_users_expired_tokens_and_keeps_the_rest(make_user):
    user, other = make_user("operator"), make_user("operator")
    old, kept, others = issue_token(user=user), issue_token(user=user), issue_token(user=other)
    AuthToken.objects.filter(token_key=old[:15]).update(expiry=timezone.now() - timedelta(seconds=1))
    AuthToken.objects.filter(token_key=others[:15]).update(expiry=timezone.now() - timedelta(seconds=1))
    new = issue_token(user=user)
    assert sorted(AuthToken.objects.filter(user=user).values_list("token_key", flat=True)) == sorted(
        [kept[:15], new[:15]])
    assert AuthToken.objects.filter(user=other).count() == 1  # another user's tokens wait for their own issue
    assert _client(kept).get("/api/v1/sessions").status_code == 200


def test_a_token_of_an_inactive_user_is_refused(make_user):
    user = make_user("admin")
    token = issue_token(user=user)
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    assert _client(token).get("/api/v1/sessions").status_code == 401
    assert user_for_token(token) is None


def test_a_token_that_is_not_utf8_is_a_401_not_a_500(db):
    client = APIClient()
    response = client.get("/api/v1/sessions", HTTP_AUTHORIZATION="Token \xff\xfe\xfd")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_the_admin_role_has_no_rights_on_tokens(make_user):
    admin = make_user("admin")
    assert not any(perm.startswith("knox.") for perm in admin.get_all_permissions())


def test_the_migration_hashes_old_plain_tokens_and_drops_their_table(make_user):
    user = make_user("operator")
    plain = "0123456789abcdef0123456789abcdef01234567"  # a DRF authtoken key
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, user_id integer, created "
                       "timestamp)")
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)", [plain, user.pk, "2026-01-01 00:00:00"])
    migration = importlib.import_module("sessions_app.migrations.0005_hash_api_tokens")
    migration.hash_plain_tokens(django_apps, SimpleNamespace(connection=connection))  # it uses only .connection
    assert "authtoken_token" not in connection.introspection.table_names()
    assert plain not in _every_stored_value()
    assert _client(plain).get("/api/v1/sessions").status_code == 200
    from knox.models import AuthToken  # the token keeps its creation time, read as the UTC it was stored in

    assert AuthToken.objects.get(user=user).created == datetime(2026, 1, 1, tzinfo=UTC)


def _answer(authentication, token: str):
    """The user's pk a token authenticates as, or the refusal's text."""
    from rest_framework import exceptions

    try:
        user, _auth = authentication.authenticate_credentials(token.encode())
    except exceptions.AuthenticationFailed as exc:
        return f"refused: {exc.detail}"
    return user.pk


def test_the_statement_based_check_answers_what_knoxs_own_check_answers(make_user):
    """HashedTokenAuthentication re-reads knox's rows with statements built once (kept for the benchmark in
    docs/benchmarks.md, "Round five"): on a knox upgrade this fails first if the two drift apart."""
    from knox.auth import TokenAuthentication

    active, inactive = make_user("operator"), make_user("operator")
    inactive.is_active = False
    inactive.save(update_fields=["is_active"])

    def cases():
        valid = issue_token(user=active)
        expired = issue_token(user=active)
        AuthToken.objects.filter(token_key=expired[:15]).update(expiry=timezone.now() - timedelta(seconds=1))
        return {"valid": valid, "forged": valid[:-1] + ("0" if valid[-1] != "0" else "1"), "unknown": "f" * 64,
                "expired": expired, "inactive user": issue_token(user=inactive)}

    ours = {name: _answer(HashedTokenAuthentication(), token) for name, token in cases().items()}
    knoxs = {name: _answer(TokenAuthentication(), token) for name, token in cases().items()}
    assert ours == knoxs
    assert ours["valid"] == active.pk and all(str(v).startswith("refused") for k, v in ours.items() if k != "valid")
