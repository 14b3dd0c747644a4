"""Fuzz the JSON API from its own OpenAPI schema: no 500s, and a rejected request changes nothing."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from compaction_app.models import Compaction, CompactionPolicy, Provider
from compactweb.api_tokens import issue_token
from sessions_app.models import RolloutLine, Session

WSGI_APP = get_wsgi_application()


@pytest.fixture
def keep_test_connection():
    """The app runs in-process inside the test's transaction; stop it closing that connection after each request
    (Django's own test client does the same)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(db, keep_test_connection, make_user, session):
    """The schema as an admin sees it (admin may call every operation), loaded through the app itself."""
    admin = make_user("admin")
    token = issue_token(user=admin)
    return schemathesis.openapi.from_wsgi(
        "/api/v1/openapi.json", WSGI_APP, headers={"Authorization": f"Token {token}"}
    )


schema = schemathesis.pytest.from_fixture("api_schema")


def _state() -> tuple[int, ...]:
    return (
        RolloutLine.objects.count(),
        Session.objects.count(),
        Compaction.objects.count(),
        Provider.objects.count(),
        CompactionPolicy.objects.count(),
    )


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_never_errors_and_rejected_requests_change_nothing(case):
    before = _state()
    response = case.call()
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    if 400 <= response.status_code < 500:
        assert _state() == before, f"{case.method} {case.formatted_path} was rejected ({response.status_code}) but changed state"
