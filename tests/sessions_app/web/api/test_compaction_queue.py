"""POST /api/v1/sessions/<id>/compact while a turn (a simulator step) holds the session: queued behind that turn as
the dashboard's "Compact now" is (issue 17), answered 202 with the job and what it waits behind; the job reads
queued -> running -> succeeded at GET /api/v1/jobs/<id>, and simulator steps wait for it meanwhile."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction
from compactweb import background
from sessions_app.compactions import queue as compaction_queue
from sessions_app.fleet import runtime as fleet
from sessions_app.fleet.runtime import STEP_LEASE_PURPOSE
from sessions_app.jobs import services as jobs
from sessions_app.models import Job
from sessions_app.rollout import lease as locks


@pytest.fixture
def submitted(monkeypatch, no_engine_sleeps):
    """The background work handed over (not run): the test runs it when it wants."""
    handed = []
    monkeypatch.setattr(background, "submit", lambda task, **kw: handed.append((task.name, kw)))
    return handed


@pytest.fixture
def held_session(make_session):
    """A session a simulator step holds (the step's lease), as when the operator asks in the middle of a run."""
    session = make_session(items=[user_message("add pagination to the list endpoint"), user_message("and test it")])
    return session, locks.acquire(session_id=session.pk, purpose=STEP_LEASE_PURPOSE)


def compact(api, session, **body):
    return api.post(f"/api/v1/sessions/{session.pk}/compact", {"method": "local", **body}, format="json")


@pytest.mark.django_db
def test_a_compaction_asked_for_during_a_step_is_queued_then_runs_then_is_done(
    operator_api, held_session, submitted, django_capture_on_commit_callbacks, monkeypatch
):
    session, step_lease = held_session
    with django_capture_on_commit_callbacks(execute=True):
        response = compact(operator_api, session)

    assert response.status_code == 202, response.content
    body = response.json()
    job_url = body["job"]["url"]
    assert body["job"]["status"] == "queued" and response["Location"] == job_url
    assert body["queued"]["behind"] == STEP_LEASE_PURPOSE and "queued behind the running turn" in body["queued"][
        "message"]
    assert body["queued"]["id"] == body["job"]["id"] and Job.objects.get().params["behind"] == STEP_LEASE_PURPOSE
    assert [name for name, _ in submitted] == ["sessions_app.jobs.tasks.run_job"]
    assert async_to_sync(fleet.arun_step)(session_id=session.pk).status == "busy"  # the next step waits for it

    polls = []

    def step_ends(seconds):  # the job waits behind the step; the step ends
        polls.append(operator_api.get(job_url).json()["status"])
        locks.release(step_lease)

    real_compact = jobs.compact

    def compacting(**kwargs):  # what a caller polling while the compaction runs reads
        polls.append(operator_api.get(job_url).json()["status"])
        return real_compact(**kwargs)

    monkeypatch.setattr(jobs, "compact", compacting)
    jobs.run_job(job_id=body["job"]["id"], sleep=step_ends)

    done = operator_api.get(job_url).json()
    compaction = Compaction.objects.get(session=session)
    assert polls == ["queued", "running"]
    assert (done["status"], done["http_status"], done["result"]) == ("succeeded", 201, {"compaction": compaction.pk})
    assert compaction.trigger == "manual" and not compaction_queue.has_queued(session_id=session.pk)
    assert operator_api.get(f"/api/v1/sessions/{session.pk}/compactions").json()[0]["id"] == compaction.pk


@pytest.mark.django_db
def test_a_second_compaction_is_refused_while_one_is_queued(operator_api, held_session, submitted):
    session, _ = held_session
    assert compact(operator_api, session).status_code == 202
    again = compact(operator_api, session)
    assert again.status_code == 409 and again.json()["error"]["code"] == "busy"
    assert "already queued" in again.json()["error"]["message"]
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_a_queued_compaction_whose_step_never_ends_fails_with_409_and_changes_nothing(
    operator_api, held_session, submitted
):
    session, _ = held_session
    job_id = compact(operator_api, session).json()["job"]["id"]
    lines_before = session.rollout_lines.count()

    jobs.run_job(job_id=job_id, wait_seconds=0)

    polled = operator_api.get(f"/api/v1/jobs/{job_id}").json()
    assert (polled["status"], polled["http_status"], polled["result"]["error"]["code"]) == ("failed", 409, "busy")
    assert "stayed busy" in polled["result"]["error"]["message"]
    assert not compaction_queue.has_queued(session_id=session.pk) and not Compaction.objects.exists()
    assert session.rollout_lines.count() == lines_before


@pytest.mark.django_db
def test_the_schema_documents_the_queued_answer(operator_api):
    schema = json.loads(operator_api.get("/api/v1/openapi.json").content)
    accepted = schema["components"]["schemas"]["JobAccepted"]
    assert "queued" in accepted["properties"] and "job" in accepted["required"]
    post = schema["paths"]["/api/v1/sessions/{id}/compact"]["post"]
    assert "queued behind it" in post["description"]
