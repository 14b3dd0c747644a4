"""A manual compaction asked for while a turn holds the session is queued behind it (shown as queued, then run as
soon as the turn ends, and simulator steps wait for it), never run twice and never refused in silence."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from compaction_app.models import Compaction
from sessions_app.compactions import queue as compaction_queue
from sessions_app.compactions import queue_runner
from sessions_app.compactions.queue import CompactionRequestRefused, request_manual_compaction
from sessions_app.fleet import runtime as fleet
from sessions_app.live import render as live_render
from sessions_app.models import QueuedCompaction
from sessions_app.rollout import lease as locks


@pytest.fixture
def submitted(monkeypatch, no_engine_sleeps):
    """The background jobs submitted (not run): the test runs them when it wants."""
    jobs = []
    monkeypatch.setattr(compaction_queue.background, "submit", lambda task, **kw: jobs.append((task, kw)))
    return jobs


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
def test_compact_now_during_a_turn_is_queued_and_the_page_says_so(operator_user, busy_session, submitted):
    session, _ = busy_session
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/", {"strategy": "local"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"Queued behind the running turn" in response.content
    (queued,) = QueuedCompaction.objects.filter(session=session)
    assert queued.status == "queued" and queued.behind == "turn" and queued.strategy == "local"
    assert [task.name for task, _ in submitted] == ["sessions_app.compactions.tasks.run_queued_compaction_task"]
    status = live_render.session_region(session=session)
    assert 'data-status="queued"' in status and "waiting behind the running turn" in status


@pytest.mark.django_db
def test_the_queued_compaction_runs_when_the_turn_releases_the_session(operator_user, busy_session, submitted):
    session, lease = busy_session
    outcome = request_manual_compaction(session_id=session.pk, actor=operator_user, strategy="local")
    waits = []

    def sleep(seconds):  # the turn ends while the queued job waits
        waits.append(seconds)
        locks.release(lease)

    compaction_id = queue_runner.run_queued(queued_id=outcome.queued_id, sleep=sleep)
    compaction = Compaction.objects.get(pk=compaction_id)
    assert waits and compaction.session_id == session.pk and compaction.trigger == "manual"
    assert QueuedCompaction.objects.get(pk=outcome.queued_id).status == "started"
    assert 'data-status="queued"' not in live_render.session_region(session=session)


@pytest.mark.django_db
def test_a_simulator_step_waits_while_an_operators_compaction_is_queued(operator_user, busy_session, submitted):
    session, lease = busy_session
    request_manual_compaction(session_id=session.pk, actor=operator_user, strategy="local")
    locks.release(lease)
    result = async_to_sync(fleet.arun_step)(session_id=session.pk)
    assert result.status == "busy"


@pytest.mark.django_db
def test_a_second_request_while_one_is_queued_is_refused_with_the_reason(operator_user, busy_session, submitted):
    session, _ = busy_session
    request_manual_compaction(session_id=session.pk, actor=operator_user, strategy="local")
    with pytest.raises(CompactionRequestRefused, match="already queued"):
        request_manual_compaction(session_id=session.pk, actor=operator_user, strategy="local")
    assert QueuedCompaction.objects.count() == 1


@pytest.mark.django_db
def test_a_request_while_a_compaction_runs_is_refused_not_queued(operator_user, make_session, submitted):
    session = make_session()
    locks.acquire(session_id=session.pk, purpose="compaction")
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/", {"strategy": ""},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 409 and b"running already" in response.content
    assert not QueuedCompaction.objects.exists() and submitted == []


@pytest.mark.django_db
def test_extra_instructions_with_a_method_that_sends_no_prompt_are_refused_up_front(operator_user, make_session,
                                                                                   submitted):
    session = make_session()
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/",
                                         {"strategy": "token_budget", "instructions": "keep names"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and b"local summarisation only" in response.content and submitted == []


@pytest.mark.django_db
def test_a_queued_compaction_that_waits_too_long_expires_and_says_so(operator_user, busy_session, submitted):
    session, _ = busy_session
    outcome = request_manual_compaction(session_id=session.pk, actor=operator_user, strategy="local")
    ticks = iter(range(100))
    assert queue_runner.run_queued(queued_id=outcome.queued_id, wait_seconds=2, clock=lambda: next(ticks),
                                       sleep=lambda s: None) is None
    assert QueuedCompaction.objects.get(pk=outcome.queued_id).status == "expired"
    assert not Compaction.objects.filter(session=session).exists()


@pytest.mark.django_db
def test_a_request_whose_waiter_died_stops_holding_simulator_steps_back(operator_user, busy_session, submitted):
    from datetime import timedelta

    from django.utils import timezone

    session, lease = busy_session
    outcome = request_manual_compaction(session_id=session.pk, actor=operator_user, strategy="local")
    locks.release(lease)
    assert compaction_queue.has_queued(session_id=session.pk)
    # its waiter never ran (a restart dropped the in-process pool): once past the waiting limit it counts no more
    QueuedCompaction.objects.filter(pk=outcome.queued_id).update(
        created_at=timezone.now() - timedelta(seconds=queue_runner.WAIT_SECONDS + 1))
    assert not compaction_queue.has_queued(session_id=session.pk)
    assert async_to_sync(fleet.arun_step)(session_id=session.pk).status == "skipped"  # not held back: past the queue check
