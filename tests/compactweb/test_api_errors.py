"""A service's domain error becomes its HTTP status in one place (compactweb.api_errors), through the JSON API."""

from __future__ import annotations

import pytest

from compactweb import api_errors
from compactweb.domain_errors import Conflict, DomainError, Invalid, NotFound, Unavailable, UpstreamFailed
from sessions_app.compactions.queue import CompactionRequestRefused, InstructionsNotSent, NoSuchSession
from sessions_app.rollout.lease import LeaseLost, SessionBusy, SessionReadOnly
from sessions_app.transfer.refusals import AlreadyImported, OffsetMismatch, TransferRefused


@pytest.mark.parametrize(("error", "status"), [
    (Invalid("x"), 400), (NotFound("x"), 404), (Conflict("x"), 409), (UpstreamFailed("x"), 502),
    (Unavailable("x"), 503), (DomainError("a bug: no category"), 500),
])
def test_each_category_answers_its_status(error, status):
    assert api_errors.status_for(error) == status


def test_a_refusal_that_is_also_a_conflict_answers_409_and_keeps_its_family():
    mismatch = OffsetMismatch("send from byte 3")
    assert isinstance(mismatch, TransferRefused) and api_errors.status_for(mismatch) == 409
    assert api_errors.status_for(AlreadyImported(thread_id="t", session_id=1)) == 409
    assert api_errors.status_for(TransferRefused("bad")) == 400
    assert [api_errors.status_for(e) for e in (NoSuchSession("gone"), InstructionsNotSent("no prompt"),
                                               CompactionRequestRefused("busy"))] == [404, 400, 409]


def test_the_lease_errors_are_conflicts_with_their_own_codes():
    assert api_errors.error_answer(SessionReadOnly(session_id=3)).body["error"]["code"] == "read_only"
    assert api_errors.error_answer(SessionBusy(session_id=3, purpose="turn")) == (
        409, {"error": {"code": "busy", "message": str(SessionBusy(session_id=3, purpose="turn"))}})
    assert api_errors.error_answer(LeaseLost("lost")) == (409, {"error": {"code": "lease_lost", "message": "lost"}})


def test_an_answer_carries_the_result_or_the_error_with_its_extra_fields():
    assert api_errors.answer(lambda: {"compaction": 7}) == (201, {"compaction": 7})

    def refused():
        raise UpstreamFailed("model overloaded", code="overloaded", attempt_id=4)

    answer = api_errors.answer(refused)
    assert not answer.ok and answer == (502, {"error": {"code": "overloaded", "message": "model overloaded",
                                                        "attempt_id": 4}})


@pytest.mark.django_db
def test_a_domain_error_raised_under_an_api_view_is_answered_in_the_error_shape(operator_api):
    response = operator_api.post("/api/v1/sessions/999999/compact", {}, format="json")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Session 999999 does not exist."}}


def test_the_turn_rollback_and_fleet_refusals_carry_their_category():
    from sessions_app.compactions.rollback import RollbackRefused
    from sessions_app.fleet.runtime import FleetError, RunStateRefused
    from sessions_app.turns.inputs import TurnInputError

    assert api_errors.error_answer(TurnInputError("input: empty")) == (
        400, {"error": {"code": "invalid", "message": "input: empty"}})
    assert api_errors.error_answer(RollbackRefused("no user turn", code="nothing_to_roll_back")).status == 409
    assert api_errors.error_answer(FleetError("count: 0")).status == 400
    refused = api_errors.error_answer(RunStateRefused("run 3 is stopped"))
    assert refused.status == 409 and refused.body["error"]["code"] == "invalid_state"


def test_the_gateways_refusal_of_a_session_it_cannot_steer_answers_409_in_the_error_shape():
    from gateway_app.operator import NOT_STEERABLE, NotSteerable

    refusal = NotSteerable(NOT_STEERABLE)
    assert api_errors.error_answer(refusal) == (409, {"error": {"code": "not_steerable", "message": NOT_STEERABLE}})
    response = api_errors.exception_handler(refusal, {})  # what an API view raising it answers
    assert (response.status_code, response.data) == (409, {"error": {"code": "not_steerable",
                                                                     "message": NOT_STEERABLE}})
