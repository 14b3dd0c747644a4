"""The compaction API (design: JSON API contract): POST /sessions/<id>/compact, GET /sessions/<id>/compactions,
GET /compactions/<id>; role checks and the error shape {"error": {"code", "message"}}; a bad request changes
nothing."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt, Hook
from sessions_app.models import Job, Session
from sessions_app.rollout.lease import acquire, release

U1, U2 = user_message("add pagination to the list endpoint"), user_message("and document it")


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def stop_hook(request: dict) -> dict:
    return {"continue": False, "stopReason": "maintenance window"}


@pytest.fixture
def api_session(make_session):
    return make_session(items=[U1, assistant("Paginated."), U2])


def error_of(response) -> dict:
    return response.json()["error"]


@pytest.mark.django_db
def test_compact_returns_201_with_the_compaction_detail(operator_api, api_session):
    response = operator_api.post(f"/api/v1/sessions/{api_session.pk}/compact",
                                 {"strategy": "local", "instructions": "mention the endpoint"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    compaction = Compaction.objects.get(pk=body["id"])
    assert (body["trigger"], body["reason"], body["phase"], body["method"], body["strategy"]) == (
        "manual", "user_requested", "standalone_turn", "local", "memento")
    assert body["replacement_history"][:2] == [U1, U2]
    assert body["before_history"] == [U1, assistant("Paginated."), U2]
    assert body["tokens_after"] == compaction.tokens_after == Session.objects.get(pk=api_session.pk).tokens_in_window
    assert body["window_number"] == 1 and body["attempts"][0]["status"] == "completed"
    assert compaction.audit_entries.get().reason == "mention the endpoint"


@pytest.mark.django_db
def test_list_and_detail_return_compacted_items_with_attempts(operator_api, api_session):
    created = operator_api.post(f"/api/v1/sessions/{api_session.pk}/compact", {"strategy": "remote_v1"},
                                format="json").json()
    listing = operator_api.get(f"/api/v1/sessions/{api_session.pk}/compactions")
    assert listing.status_code == 200
    (row,) = listing.json()
    assert row["id"] == created["id"] and row["replacement_history"] == created["replacement_history"]
    assert row["attempts"][0]["implementation"] == "responses_compact" and row["attempts"][0]["duration_ms"] >= 0
    detail = operator_api.get(f"/api/v1/compactions/{created['id']}")
    assert detail.status_code == 200 and detail.json() == created


@pytest.mark.django_db
def test_compact_while_another_compaction_runs_is_409_with_a_clear_message(operator_api, api_session):
    # (while a turn holds the session the compaction is queued instead: tests/sessions_app/web/api/test_compaction_queue.py)
    lease = acquire(session_id=api_session.pk, purpose="compaction")
    try:
        response = operator_api.post(f"/api/v1/sessions/{api_session.pk}/compact", {}, format="json")
    finally:
        release(lease)
    assert response.status_code == 409
    assert error_of(response) == {
        "code": "busy", "message": "A compaction of this session is running already; wait for its result."}


@pytest.mark.django_db
@pytest.mark.parametrize("body,fragment", [
    ({"strategy": "bogus"}, "strategy"),
    ({"trigger": "auto"}, "needs a phase"),
    ({"trigger": "auto", "phase": "standalone_turn"}, "manual compaction"),
    ({"phase": "sideways"}, "phase"),
])
def test_an_invalid_body_is_400_and_changes_nothing(operator_api, api_session, body, fragment):
    response = operator_api.post(f"/api/v1/sessions/{api_session.pk}/compact", body, format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid" and fragment in error_of(response)["message"]
    assert not CompactionAttempt.objects.exists()
    assert Session.objects.get(pk=api_session.pk).last_seq == api_session.last_seq


@pytest.mark.django_db
def test_a_strategy_the_configuration_refuses_is_400(operator_api, api_session):
    response = operator_api.post(f"/api/v1/sessions/{api_session.pk}/compact",
                                 {"strategy": "remote_v2", "instructions": "be brief"}, format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "compaction_refused"
    assert "Extra instructions apply to local summarisation only" in error_of(response)["message"]
    assert not CompactionAttempt.objects.exists() and not Job.objects.exists()  # refused before it became a job


@pytest.mark.django_db
def test_a_provider_failure_is_502_with_the_error_kind_and_attempt_id(operator_api, api_session):
    Session.objects.filter(pk=api_session.pk).update(fault_injection={"fault": "compact_malformed"})
    response = operator_api.post(f"/api/v1/sessions/{api_session.pk}/compact", {"strategy": "remote_v1"},
                                 format="json")
    assert response.status_code == 502
    error = error_of(response)
    attempt = CompactionAttempt.objects.get(pk=error["attempt_id"])
    assert error["code"] == "bad_response" == attempt.error_kind
    # Codex's wording for a remote failure; the attempt keeps the bare cause (spec §4 step 6).
    assert error["message"] == f"Error running remote compact task: {attempt.error_message}"
    assert attempt.status == "failed"
    assert Session.objects.get(pk=api_session.pk).window_number == 0


@pytest.mark.django_db
def test_a_stopping_pre_compact_hook_is_409_interrupted(operator_api, api_session, policy):
    policy.hooks.add(Hook.objects.create(
        name="stopper", event="pre_compact", target="tests.compaction_app.api.test_compaction_api.stop_hook"))
    response = operator_api.post(f"/api/v1/sessions/{api_session.pk}/compact", {}, format="json")
    assert response.status_code == 409
    error = error_of(response)
    assert error["code"] == "interrupted" and "maintenance window" in error["message"]
    assert CompactionAttempt.objects.get(pk=error["attempt_id"]).status == "interrupted"


@pytest.mark.django_db
def test_unknown_session_and_compaction_are_404(operator_api):
    assert error_of(operator_api.post("/api/v1/sessions/99999/compact", {}, format="json"))["code"] == "not_found"
    assert operator_api.get("/api/v1/sessions/99999/compactions").status_code == 404
    response = operator_api.get("/api/v1/compactions/99999")
    assert response.status_code == 404 and error_of(response)["code"] == "not_found"


@pytest.mark.django_db
@pytest.mark.parametrize("method,path", [("post", "/api/v1/sessions/{id}/compact"),
                                         ("get", "/api/v1/sessions/{id}/compactions"),
                                         ("get", "/api/v1/compactions/1")])
def test_anonymous_is_401_and_role_less_is_403(anon_api, norole_api, api_session, method, path):
    url = path.format(id=api_session.pk)
    anonymous = getattr(anon_api, method)(url, {}, format="json")
    assert anonymous.status_code == 401 and error_of(anonymous)["code"] == "not_authenticated"
    role_less = getattr(norole_api, method)(url, {}, format="json")
    assert role_less.status_code == 403 and error_of(role_less)["code"] == "permission_denied"
    assert not CompactionAttempt.objects.exists()


@pytest.mark.django_db
def test_the_openapi_schema_documents_the_compaction_endpoints(operator_api):
    paths = operator_api.get("/api/v1/openapi.json").json()["paths"]
    assert "requestBody" in paths["/api/v1/sessions/{id}/compact"]["post"]
    assert {"201", "400", "404", "409", "502"} <= set(paths["/api/v1/sessions/{id}/compact"]["post"]["responses"])
    assert "get" in paths["/api/v1/sessions/{id}/compactions"] and "get" in paths["/api/v1/compactions/{id}"]
