"""20 compaction requests for one session at the same moment on PostgreSQL (issues 8, 31): exactly one compaction
is installed, the 19 others are refused (SessionBusy saying why; through the API, 409), and the history still
equals its rebuild."""

from __future__ import annotations

import time

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt
from sessions_app.compactions.services import do_compact_session
from sessions_app.models import Job, RolloutLine, Session
from sessions_app.rollout.lease import SessionBusy
from sessions_app.rollout.services import verify_projection
from tests.scale_out.at_once import AtOnce

REQUESTS = 20
# The winner holds the lease for at least this long (the simulated model's delay): far longer than the 19 others
# need to try, with their database connections opened before the start line.
SLOW_SECONDS = 2


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_compactions_install_exactly_one_and_refuse_the_rest(on_postgresql, make_session):
    session = make_session(items=[user_message("summarize the incident report"), user_message("and the fix")])
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    lines_before = RolloutLine.objects.filter(session=session).count()
    results = AtOnce(REQUESTS, lambda: do_compact_session(session_id=session.pk, strategy="local")).start().join(60)

    installed = [r for r in results if isinstance(r, Compaction)]
    refused = [r for r in results if isinstance(r, SessionBusy)]
    assert len(installed) == 1, results
    assert len(refused) == REQUESTS - 1, [r for r in results if not isinstance(r, Compaction | SessionBusy)]
    assert {str(r) for r in refused} == {
        f"session {session.pk} is busy: a compaction is running; try again when it ends"}
    assert Compaction.objects.filter(session=session).count() == 1
    assert list(CompactionAttempt.objects.filter(session=session).values_list("status", flat=True)) == ["completed"]
    # one `compacted` line (plus its event lines) was appended, once
    assert RolloutLine.objects.filter(session=session, kind="compacted").count() == 1
    assert RolloutLine.objects.filter(session=session).count() > lines_before
    session.refresh_from_db()
    assert session.lease_holder == ""
    assert verify_projection(session=session) == []


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("wait", ["true", "false"])
def test_twenty_concurrent_api_compactions_make_one_job_and_refuse_the_rest_with_409(
    on_postgresql, make_session, operator_user, api_client_for, wait
):
    """Issue 31: every request used to become a job, and each job that found the session free compacted again.
    The request in the request thread (wait=true) or on the in-process pool (wait=false): one job, one compaction."""
    session = make_session(items=[user_message("summarize the incident report"), user_message("and the fix")])
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    api_client_for(operator_user)  # its token made once, before the race

    def compact():
        response = api_client_for(operator_user).post(
            f"/api/v1/sessions/{session.pk}/compact?wait={wait}", {"strategy": "local"}, format="json")
        return response.status_code, response.json()

    results = AtOnce(REQUESTS, compact).start().join(60)

    statuses = sorted(r[0] if isinstance(r, tuple) else repr(r) for r in results)
    assert statuses == sorted([201 if wait == "true" else 202] + [409] * (REQUESTS - 1)), results
    refusals = {r[1]["error"]["code"] for r in results if r[0] == 409}
    assert refusals == {"busy"}, results
    (job,) = Job.objects.filter(session=session)
    deadline = time.monotonic() + 60
    while Job.objects.get(pk=job.pk).status in ("queued", "running"):  # wait=false: the pool runs it
        assert time.monotonic() < deadline, "the job did not finish"
        time.sleep(0.05)
    job.refresh_from_db()
    assert (job.status, job.http_status) == ("succeeded", 201)
    assert list(Compaction.objects.filter(session=session).values_list("pk", flat=True)) == [
        job.result["compaction"]]
    assert RolloutLine.objects.filter(session=session, kind="compacted").count() == 1
    session.refresh_from_db()
    assert session.lease_holder == ""
    assert verify_projection(session=session) == []
