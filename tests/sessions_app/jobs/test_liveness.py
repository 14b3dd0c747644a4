"""A job whose process died ends (issue 15): the process running a job beats (Job.heartbeat_at); a running job
without a beat for one lease TTL is finished as failed, 503 `interrupted`, by the scheduler's housekeeping and by
any read of the job through the API, while a job that still beats is left running. tests/scale_out/
test_worker_killed_mid_job.py SIGKILLs a real worker mid-job."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone

from compaction_app.engine.items import user_message
from compactweb.api_errors import Answer
from sessions_app.compactions.queue import WAIT_SECONDS, has_queued
from sessions_app.fleet.scheduler import Scheduler
from sessions_app.jobs import liveness
from sessions_app.jobs import services as jobs
from sessions_app.jobs.tasks import do_request_compaction
from sessions_app.models import Job

TTL = timedelta(seconds=30)  # the test settings' lease TTL (the default)


@pytest.fixture
def running_job(make_session, make_user):
    session = make_session(items=[user_message("collect the deploy logs")])
    long_ago = timezone.now() - TTL - timedelta(seconds=5)
    return Job.objects.create(kind="compaction", session=session, params={"strategy": "local"},
                              status=Job.Status.RUNNING, started_at=long_ago, heartbeat_at=long_ago)


def interrupted(job: Job) -> bool:
    job.refresh_from_db()
    return (job.status, job.http_status, job.result) == ("failed", 503, {"error": {
        "code": "interrupted", "message": liveness.JOB_LOST_MESSAGE}}) and job.finished_at is not None


@pytest.mark.django_db
def test_a_running_job_without_a_heartbeat_for_a_ttl_ends_interrupted(running_job):
    assert liveness.reap_dead_jobs() == [running_job.pk]
    assert interrupted(running_job)
    assert liveness.reap_dead_jobs() == []  # once


@pytest.mark.django_db
def test_a_job_that_still_beats_is_left_running(running_job):
    liveness.beat(job_id=running_job.pk)

    assert liveness.reap_dead_jobs() == []
    running_job.refresh_from_db()
    assert running_job.status == "running" and running_job.http_status is None


@pytest.mark.django_db
def test_a_job_taken_but_not_yet_beating_is_judged_by_its_start(running_job):
    Job.objects.filter(pk=running_job.pk).update(heartbeat_at=None, started_at=timezone.now())
    assert liveness.reap_dead_jobs() == []

    Job.objects.filter(pk=running_job.pk).update(started_at=timezone.now() - TTL - timedelta(seconds=1))
    assert liveness.reap_dead_jobs() == [running_job.pk]


@pytest.mark.django_db
def test_queued_jobs_that_never_beat_and_finished_jobs_are_never_reaped(running_job):
    Job.objects.filter(pk=running_job.pk).update(status=Job.Status.QUEUED, heartbeat_at=None)
    assert liveness.reap_dead_jobs() == []
    Job.objects.filter(pk=running_job.pk).update(status=Job.Status.SUCCEEDED, http_status=201)
    assert liveness.reap_dead_jobs() == []


@pytest.mark.django_db
def test_polling_a_dead_job_through_the_api_ends_it(operator_api, running_job):
    polled = operator_api.get(f"/api/v1/jobs/{running_job.pk}").json()

    assert (polled["status"], polled["http_status"]) == ("failed", 503)
    assert polled["result"]["error"]["code"] == "interrupted"


@pytest.mark.django_db(transaction=True)
def test_the_schedulers_housekeeping_ends_dead_jobs(running_job):
    asyncio.run(Scheduler(inline=True).housekeeping())

    assert interrupted(running_job)


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_renews_while_its_block_runs_and_stops_after(running_job):
    Job.objects.filter(pk=running_job.pk).update(heartbeat_at=None)
    with liveness.heartbeat(job_id=running_job.pk, ttl=timedelta(seconds=0.3)):
        running_job.refresh_from_db()
        first = running_job.heartbeat_at
        assert first is not None  # beats at once
        deadline = timezone.now() + timedelta(seconds=5)
        while running_job.heartbeat_at == first:
            assert timezone.now() < deadline, "the heartbeat was never renewed"
            running_job.refresh_from_db()
    last = Job.objects.get(pk=running_job.pk).heartbeat_at
    asyncio.run(asyncio.sleep(0.3))
    assert Job.objects.get(pk=running_job.pk).heartbeat_at == last


@pytest.mark.django_db
def test_a_dead_jobs_real_outcome_still_wins_when_it_comes(running_job):
    liveness.reap_dead_jobs()
    jobs._finish(running_job.pk, Answer(201, {"compaction": 1}))  # the job was alive after all (a database blip)

    running_job.refresh_from_db()
    assert (running_job.status, running_job.http_status) == ("succeeded", 201)


@pytest.fixture
def job_queued_behind_a_turn(make_session):
    session = make_session(items=[user_message("collect the deploy logs")])
    return Job.objects.create(kind="compaction", session=session, status=Job.Status.QUEUED,
                              params={"strategy": "local", "behind": "simulator step"})


@pytest.mark.django_db
def test_a_job_waiting_behind_a_turn_beats_while_it_waits(job_queued_behind_a_turn):
    liveness.beat(job_id=job_queued_behind_a_turn.pk)

    job_queued_behind_a_turn.refresh_from_db()
    assert job_queued_behind_a_turn.status == "queued" and job_queued_behind_a_turn.heartbeat_at is not None
    assert liveness.reap_dead_jobs() == []


@pytest.mark.django_db
def test_a_job_waiting_behind_a_turn_whose_process_died_ends_interrupted_and_leaves_the_queue(
    job_queued_behind_a_turn,
):
    session_id = job_queued_behind_a_turn.session_id
    assert has_queued(session_id=session_id)
    long_ago = timezone.now() - TTL - timedelta(seconds=5)
    Job.objects.filter(pk=job_queued_behind_a_turn.pk).update(heartbeat_at=long_ago)

    assert liveness.reap_dead_jobs() == [job_queued_behind_a_turn.pk]
    assert interrupted(job_queued_behind_a_turn)
    assert not has_queued(session_id=session_id)  # simulator steps go on


@pytest.mark.django_db
def test_a_queued_job_no_process_has_taken_yet_is_left_waiting(job_queued_behind_a_turn):
    Job.objects.filter(pk=job_queued_behind_a_turn.pk).update(created_at=timezone.now() - TTL * 10)

    assert liveness.reap_dead_jobs() == []
    job_queued_behind_a_turn.refresh_from_db()
    assert job_queued_behind_a_turn.status == "queued"


@pytest.mark.django_db
def test_a_compaction_no_runner_started_within_the_queue_wait_ends_and_frees_its_session(
    job_queued_behind_a_turn, operator_user
):
    session_id = job_queued_behind_a_turn.session_id
    Job.objects.filter(pk=job_queued_behind_a_turn.pk).update(
        created_at=timezone.now() - timedelta(seconds=WAIT_SECONDS + 1))

    assert liveness.reap_dead_jobs() == [job_queued_behind_a_turn.pk]
    job_queued_behind_a_turn.refresh_from_db()
    assert (job_queued_behind_a_turn.status, job_queued_behind_a_turn.http_status) == ("failed", 409)
    assert "no worker started this compaction" in job_queued_behind_a_turn.result["error"]["message"]
    assert jobs.run_job(job_id=job_queued_behind_a_turn.pk) is None  # a runner that comes late does nothing
    again = do_request_compaction(session_id=session_id, actor=operator_user, strategy="local", inline=True)
    assert again.status == "succeeded"  # the session takes a new manual compaction
