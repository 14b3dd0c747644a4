"""A database that does not answer, or refuses writes (issue 31): the JSON API answers 503 in its one error shape,
pages answer a styled 503 saying so, and /healthz tells the truth with a write probe. The fault is injected at the
database layer (every statement of the test's connection fails as PostgreSQL's restart or a full SQLite disk
fails it); tests/scale_out/test_database_outage.py cuts a real PostgreSQL."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager

import pytest
from django.db import OperationalError, connection
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)

WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|PRAGMA\s+user_version\s*=|SELECT txid_current)", re.IGNORECASE)


@contextmanager
def database_fails(*, writes_only: bool = False, message: str = "server closed the connection unexpectedly"):
    """Every statement (or every write) on this thread's connection raises OperationalError."""
    def fail(execute, sql, params, many, context):
        if not writes_only or WRITE.match(sql):
            raise OperationalError(message)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(fail):
        yield


def test_the_api_answers_503_in_its_error_shape_while_the_database_is_down(operator_api, make_session):
    session = make_session()
    operator_api.raise_request_exception = False
    with database_fails():
        for response in (operator_api.get("/api/v1/sessions"), operator_api.get(f"/api/v1/sessions/{session.pk}")):
            assert response.status_code == 503
            assert response["Content-Type"].startswith("application/json")
            assert response.json()["error"]["code"] == "database_unavailable"
            assert set(response.json()) == {"error"} and set(response.json()["error"]) == {"code", "message"}
            assert response["Retry-After"] == "5"
    assert operator_api.get("/api/v1/sessions").status_code == 200  # and answers again once it is back


def test_an_api_error_outside_the_api_views_is_json_too(rf):
    from compactweb.error_pages import server_error

    request = rf.get("/api/v1/sessions")
    try:
        raise OperationalError("could not connect to server")
    except OperationalError:
        response = server_error(request)
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert json.loads(response.content)["error"]["code"] == "database_unavailable"
    try:
        raise ValueError("a bug")
    except ValueError:
        response = server_error(request)
    assert response.status_code == 500 and json.loads(response.content)["error"]["code"] == "internal_error"


def test_a_page_answers_a_styled_503_while_the_database_refuses_writes(operator_user, provider, policy, settings):
    from sessions_app.fleet import runtime as fleet

    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(operator_user)
    run = fleet.do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy)[0]
    with database_fails(writes_only=True, message="attempt to write a readonly database"):
        response = client.post(f"/sessions/{run.session_id}/run/pause/")
    body = response.content.decode()
    assert response.status_code == 503, body[:500]
    assert "The database is not answering" in body and "Traceback" not in body
    assert 'class="card error-page"' in body


def test_a_page_answers_a_styled_503_while_the_database_is_down(operator_user, settings):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(operator_user)
    with database_fails():
        response = client.get("/")
    assert response.status_code == 503
    assert "The database is not answering" in response.content.decode()


def test_healthz_fails_the_database_when_it_answers_reads_but_refuses_writes():
    client = Client()
    assert client.get("/healthz").json()["checks"]["database"] == "ok"
    with database_fails(writes_only=True, message="database or disk is full"):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "failing (OperationalError)"
    assert client.get("/healthz").status_code == 200
