"""Fuzz the JSON API from its own OpenAPI schema: no 500s, every answer has the schema's shape, and a rejected
request changes nothing. Then every operation that answers JSON, called on real rows, answers what the schema says."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

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


# Per push: a few cases per operation, the same ones every run (derandomised), so a red CI replays as it failed.
# scripts/nightly sets COMPACTWEB_FUZZ_EXAMPLES (e.g. 200) and draws fresh cases each night.
NIGHTLY_EXAMPLES = int(os.environ.get("COMPACTWEB_FUZZ_EXAMPLES", "0"))
PER_PUSH_EXAMPLES = 8


@pytest.mark.fuzz
# One test whose operations are subtests: the per-test limit (300 s, pyproject.toml) is for one test's hang, and the
# whole fuzz took 77 s in an idle CI and over 300 s on a machine at load 15 to 25.
@pytest.mark.timeout(900)
@schema.parametrize()
@settings(
    max_examples=NIGHTLY_EXAMPLES or PER_PUSH_EXAMPLES,
    derandomize=not NIGHTLY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_never_errors_and_rejected_requests_change_nothing(case):
    before = _state()
    response = case.call()
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    # Every answer has the shape the schema gives for its status (the serializers that generate the schema made it).
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
    if 400 <= response.status_code < 500:
        assert _state() == before, f"{case.method} {case.formatted_path} was rejected ({response.status_code}) but changed state"


CONFORMANCE_CHECKS = [not_a_server_error, response_schema_conformance]


def test_every_json_answer_on_real_rows_matches_the_schema(api_schema, scripted_sessions, make_user):
    """Random ids mostly meet 404s, so the fuzzing above rarely sees a full body: here each operation answers for
    a session with a compaction, a failed attempt, a rollback, a redo, a turn and a replay."""
    from tests.fakes.scripted_api import compaction_reply, text_reply
    from tests.fakes.scripted_provider import Reply

    script = scripted_sessions.script
    headers = {"Authorization": f"Token {issue_token(user=make_user('admin', username='schema-admin'))}"}

    def answer(method: str, path: str, *, status: int, body=None, query=None, **path_parameters):
        # Every call goes through the app as the fuzzing does (the test client would close the test's connection).
        case = api_schema[path][method].Case(path_parameters=path_parameters, query=query, headers=headers,
                                             **({"body": body, "media_type": "application/json"} if body else {}))
        response = case.call()
        assert response.status_code == status, f"{method} {path} -> {response.status_code}: {response.text[:300]}"
        # A documented 502 (the provider failed) is the answer asked for here, not a server error.
        case.validate_response(response, checks=CONFORMANCE_CHECKS if status < 500 else [response_schema_conformance])
        return response.json()

    provider, policy = scripted_sessions.provider(), scripted_sessions.policy()
    session = answer("POST", "/api/v1/sessions", status=201, body={
        "title": "schema", "provider": provider.pk, "policy": policy.pk,
        "items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}]})
    sid = session["id"]
    script.add(Reply.error(503, {"error": {"code": "server_is_overloaded", "message": "try later"}}))
    failed = answer("POST", "/api/v1/sessions/{id}/compact", status=502, body={"method": "remote_v2"},
                    query={"wait": "true"}, id=sid)
    attempt_id = failed["error"]["attempt_id"]
    script.add(compaction_reply("ENC"))
    compaction = answer("POST", "/api/v1/sessions/{id}/compact", status=201, body={"method": "remote_v2"},
                        query={"wait": "true"}, id=sid)
    script.add(text_reply("Done."))
    answer("POST", "/api/v1/sessions/{id}/turns", status=200, body={"input": "next"}, id=sid)
    answer("POST", "/api/v1/sessions/{id}/items", status=201,
           body={"items": [{"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": "more"}]}]}, id=sid)
    for path in ("/api/v1/sessions/{id}", "/api/v1/sessions/{id}/history", "/api/v1/sessions/{id}/compactions",
                 "/api/v1/sessions/{id}/attempts", "/api/v1/sessions/{id}/pins"):
        answer("GET", path, status=200, id=sid)
    answer("GET", "/api/v1/compactions/{id}", status=200, id=compaction["id"])
    answer("GET", "/api/v1/attempts/{id}", status=200, id=attempt_id)
    answer("GET", "/api/v1/compactions/{id}/rollback", status=200, id=compaction["id"])
    answer("POST", "/api/v1/compactions/{id}/rollback", status=200, body={"reason": "check"}, id=compaction["id"])
    answer("POST", "/api/v1/compactions/{id}/redo", status=200, body={"reason": "check"}, id=compaction["id"])
    answer("POST", "/api/v1/sessions/{id}/thread-rollback", status=200, body={"num_turns": 1}, id=sid)
    replay = answer("POST", "/api/v1/sessions/{id}/replay", status=201, body={"policy": policy.pk},
                    query={"wait": "true"}, id=sid)
    answer("GET", "/api/v1/sessions/{id}/comparison", status=200, id=replay["replay"])
    for path in ("/api/v1/sessions", "/api/v1/providers", "/api/v1/policies", "/api/v1/scenarios", "/api/v1/fleet"):
        assert answer("GET", path, status=200) is not None


def test_the_archive_answers_on_real_rows_match_the_schema(api_schema, make_session, make_user, settings, tmp_path):
    """The archives' list, detail, restore and a second restore's 409, on a real archive (the fuzzing meets none)."""
    from datetime import timedelta

    from django.utils import timezone

    from compaction_app.engine.items import user_message
    from sessions_app.archive import services

    settings.COMPACTWEB_ARCHIVE_DIR = tmp_path / "archive"
    session = make_session(items=[user_message("rename the package")])
    Session.objects.filter(pk=session.pk).update(state="stopped", updated_at=timezone.now() - timedelta(days=40))
    assert services.do_run_archiver(trigger="test").archived == 1
    headers = {"Authorization": f"Token {issue_token(user=make_user('admin', username='archive-admin'))}"}

    def answer(method: str, path: str, *, status: int, query=None, **path_parameters):
        case = api_schema[path][method].Case(path_parameters=path_parameters, query=query, headers=headers)
        response = case.call()
        assert response.status_code == status, f"{method} {path} -> {response.status_code}: {response.text[:300]}"
        case.validate_response(response, checks=CONFORMANCE_CHECKS)
        return response.json()

    [listed] = answer("GET", "/api/v1/archives", status=200, query={"limit": 5})
    answer("GET", "/api/v1/archives/{id}", status=200, id=listed["id"])
    restored = answer("POST", "/api/v1/archives/{id}/restore", status=201, id=listed["id"])
    assert Session.objects.filter(pk=restored["session"]).exists()
    again = answer("POST", "/api/v1/archives/{id}/restore", status=409, id=listed["id"])
    assert again["error"]["code"] == "already_imported"
