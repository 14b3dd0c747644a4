"""A manual compaction asked for from a page while a turn holds the session is a job queued behind it (shown as
queued, then run as soon as the turn ends, and simulator steps wait for it), never run twice and never refused in
silence; the page follows the job over the session's websocket (its job.* events re-render the status box)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from compaction_app.models import Compaction
from compactweb import background
from sessions_app.compactions import queue as compaction_queue
from sessions_app.compactions.queue import CompactionRequestRefused
from sessions_app.fleet import runtime as fleet
from sessions_app.jobs import services as jobs
from sessions_app.jobs.tasks import do_request_compaction
from sessions_app.live import render as live_render
from sessions_app.models import Job
from sessions_app.rollout import lease as locks

RUN_JOB = "sessions_app.jobs.tasks.run_job"


@pytest.fixture
def submitted(monkeypatch, no_engine_sleeps):
    """The background work handed over (not run): the test runs it when it wants."""
    handed = []
    monkeypatch.setattr(background, "submit", lambda task, **kw: handed.append((task, kw)))
    return handed


def request(user, session, **params):
    return do_request_compaction(session_id=session.pk, actor=user, **params)


@pytest.fixture
def busy_session(make_session, items_factory):
    session = make_session(items=[items_factory.user("fix the parser " + "now " * 50),
                                  items_factory.assistant("fixed " + "ok " * 500)])
    lease = locks.acquire(session_id=session.pk, purpose="turn")
    return session, lease


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_compact_now_during_a_turn_is_queued_and_the_page_says_so(operator_user, busy_session, submitted,
                                                                   django_capture_on_commit_callbacks):
    session, _ = busy_session
    with django_capture_on_commit_callbacks(execute=True):  # handed to the runner once the request commits
        response = login(operator_user).post(f"/sessions/{session.pk}/compact/", {"strategy": "local"},
                                             HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"Queued behind the running turn" in response.content
    (queued,) = Job.objects.filter(session=session)
    assert (queued.kind, queued.status, queued.params["behind"], queued.params["strategy"]) == (
        "compaction", "queued", "turn", "local")
    assert [(task.name, kw) for task, kw in submitted] == [(RUN_JOB, {"job_id": queued.pk})]
    status = live_render.session_region(session=session)
    assert 'data-status="queued"' in status and "waiting behind the running turn" in status


@pytest.mark.django_db
def test_the_queued_compaction_runs_when_the_turn_releases_the_session(operator_user, busy_session, submitted):
    session, lease = busy_session
    job = request(operator_user, session, strategy="local")
    waits = []

    def sleep(seconds):  # the turn ends while the queued job waits
        waits.append(seconds)
        locks.release(lease)

    done = jobs.run_job(job_id=job.pk, sleep=sleep)
    compaction = Compaction.objects.get(pk=done.result["compaction"])
    assert waits and compaction.session_id == session.pk and compaction.trigger == "manual"
    assert (done.status, done.http_status) == ("succeeded", 201)
    assert 'data-status="queued"' not in live_render.session_region(session=session)


@pytest.mark.django_db
def test_a_simulator_step_waits_while_an_operators_compaction_is_queued(operator_user, busy_session, submitted):
    session, lease = busy_session
    request(operator_user, session, strategy="local")
    locks.release(lease)
    result = async_to_sync(fleet.arun_step)(session_id=session.pk)
    assert result.status == "busy"


@pytest.mark.django_db
def test_a_second_request_while_one_is_queued_is_refused_with_the_reason(operator_user, busy_session, submitted):
    session, _ = busy_session
    request(operator_user, session, strategy="local")
    with pytest.raises(CompactionRequestRefused, match="already queued"):
        request(operator_user, session, strategy="local")
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_a_request_while_a_compaction_runs_is_refused_not_queued(operator_user, make_session, submitted):
    session = make_session()
    locks.acquire(session_id=session.pk, purpose="compaction")
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/", {"strategy": ""},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 409 and b"running already" in response.content
    assert not Job.objects.exists() and submitted == []


@pytest.mark.django_db
def test_extra_instructions_with_a_method_that_sends_no_prompt_are_refused_up_front(operator_user, make_session,
                                                                                   submitted):
    session = make_session()
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/",
                                         {"strategy": "token_budget", "instructions": "keep names"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and b"local summarisation only" in response.content and submitted == []
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_queued_compaction_that_waits_too_long_expires_and_the_page_says_so(operator_user, busy_session,
                                                                            submitted):
    session, _ = busy_session
    job = request(operator_user, session, strategy="local")
    ticks = iter(range(100))
    events = []
    real_publish = jobs.publish_transient

    def publish(**kw):
        events.append(kw)
        real_publish(**kw)

    jobs.publish_transient = publish
    try:
        done = jobs.run_job(job_id=job.pk, wait_seconds=2, clock=lambda: next(ticks), sleep=lambda s: None)
    finally:
        jobs.publish_transient = real_publish
    assert (done.status, done.http_status, done.result["error"]["code"]) == ("failed", 409, "busy")
    assert not Compaction.objects.filter(session=session).exists()
    finished = next(e for e in events if e["kind"] == "job.finished")
    box = live_render.session_transient(session_id=session.pk, event=finished)  # what the page receives
    assert "stayed busy" in box and 'data-status="queued"' not in box


@pytest.mark.django_db
def test_a_request_whose_runner_never_started_stops_holding_simulator_steps_back(operator_user, busy_session,
                                                                               submitted):
    from datetime import timedelta

    from django.utils import timezone

    session, lease = busy_session
    job = request(operator_user, session, strategy="local")
    locks.release(lease)
    assert compaction_queue.has_queued(session_id=session.pk)
    # its runner never ran (a restart dropped the in-process pool): once past the waiting limit it counts no more
    Job.objects.filter(pk=job.pk).update(
        created_at=timezone.now() - timedelta(seconds=compaction_queue.WAIT_SECONDS + 1))
    assert not compaction_queue.has_queued(session_id=session.pk)
    assert async_to_sync(fleet.arun_step)(session_id=session.pk).status == "skipped"  # not held back: past the queue check


@pytest.mark.django_db
def test_the_page_and_the_api_take_the_same_longest_instructions(operator_user, operator_api, busy_session,
                                                                 submitted):
    """One action, one limit: what the API takes for a manual compaction, the session page takes too (the page
    refused anything over 4,000 characters while the API took 20,000)."""
    from compaction_app.engine.vocabulary import MAX_EXTRA_INSTRUCTIONS

    session, _ = busy_session
    page = login(operator_user)
    longest, too_long = "x" * MAX_EXTRA_INSTRUCTIONS, "x" * (MAX_EXTRA_INSTRUCTIONS + 1)
    refused = page.post(f"/sessions/{session.pk}/compact/", {"strategy": "local", "instructions": too_long},
                        HTTP_HX_REQUEST="true")
    assert refused.status_code == 400 and b"limited to 20,000 characters" in refused.content
    api_refused = operator_api.post(f"/api/v1/sessions/{session.pk}/compact",
                                    {"method": "local", "instructions": too_long}, format="json")
    assert api_refused.status_code == 400 and api_refused.json()["error"]["message"].startswith("instructions:")
    assert not Job.objects.exists()
    taken = page.post(f"/sessions/{session.pk}/compact/", {"strategy": "local", "instructions": longest},
                      HTTP_HX_REQUEST="true")
    assert taken.status_code == 200 and b"Queued behind the running turn" in taken.content
    (queued,) = Job.objects.filter(session=session)
    assert queued.params["instructions"] == longest
