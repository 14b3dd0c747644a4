"""Retention runs on a schedule (issue 34): the scheduler's housekeeping hands the archiver task to a runner when
retention is enabled and a run is due, Celery beat names the same task, and a period's run is claimed once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from compaction_app.models import RetentionSettings
from sessions_app.archive import tasks
from sessions_app.fleet.scheduler import Scheduler, housekeeping_done
from sessions_app.models import ArchiveRun, Session, SessionArchive


@pytest.fixture(autouse=True)
def _check_every_round(monkeypatch):
    """The receiver reads the settings at most once a minute per process: every round here."""
    monkeypatch.setattr(tasks, "CHECK_EVERY_SECONDS", 0.0)


@pytest.fixture
def eager_runner(with_workers):
    """The task runs in the test's thread (a Celery task, eager in the tests), as a worker would run it."""


def _enable(**fields) -> RetentionSettings:
    RetentionSettings.objects.update_or_create(pk=1, defaults={"enabled": True, **fields})
    return RetentionSettings.current()


def test_the_schedulers_housekeeping_runs_the_archiver_when_enabled(ended_session, eager_runner):
    _enable(archive_after_days=30)

    housekeeping_done.send(sender=Scheduler)  # what the scheduler sends after each housekeeping round

    assert not Session.objects.filter(pk=ended_session.pk).exists()
    record = SessionArchive.objects.get(session_id=ended_session.pk)
    run = ArchiveRun.objects.get()
    assert (run.trigger, run.archived, record.archived_by) == ("scheduler", 1, "scheduler")
    assert RetentionSettings.current().last_run_at is not None


def test_nothing_runs_while_retention_is_disabled(ended_session, eager_runner):
    RetentionSettings.current()  # the default row: disabled
    assert tasks.archive_if_due() is False
    assert tasks.run_scheduled_archiver() is None
    assert Session.objects.filter(pk=ended_session.pk).exists() and not ArchiveRun.objects.exists()


def test_a_period_is_run_once_however_many_schedulers_ask(ended_session, eager_runner):
    _enable(run_every_hours=24)
    assert tasks.archive_if_due() is True
    assert tasks.archive_if_due() is False  # the run claimed this period
    assert tasks.run_scheduled_archiver() is None  # beat's message finds it claimed too
    assert ArchiveRun.objects.count() == 1
    RetentionSettings.objects.filter(pk=1).update(last_run_at=timezone.now() - timedelta(hours=25))
    assert tasks.archive_if_due() is True
    assert ArchiveRun.objects.count() == 2


def test_the_claim_is_a_conditional_update_true_for_one_caller(db):
    _enable(run_every_hours=6)
    now = timezone.now()
    assert [tasks.claim_run(now=now) for _ in range(3)] == [True, False, False]
    assert tasks.claim_run(now=now + timedelta(hours=6)) is True


def test_celery_beat_sends_the_registered_archiver_task():
    from compactweb.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["archive-ended-sessions"]
    app.loader.import_default_modules()
    assert entry["task"] == tasks.run_scheduled_archiver.name
    assert entry["task"] in app.tasks


@pytest.fixture
def submitted(monkeypatch) -> list:
    """What the receiver hands to a runner (not run: the settings row stays as it was)."""
    handed: list = []
    monkeypatch.setattr(tasks.background, "submit", lambda task, **kwargs: handed.append(task))
    return handed


def test_the_housekeeping_reads_the_retention_settings_at_most_once_a_minute(db, monkeypatch, submitted):
    monkeypatch.setattr(tasks, "CHECK_EVERY_SECONDS", 60.0)
    monkeypatch.setitem(tasks._checked, "at", float("-inf"))  # this process never checked
    _enable(run_every_hours=24)  # due: never run
    now = [1000.0]

    def clock() -> float:
        return now[0]

    assert tasks.archive_if_due(clock=clock) is True
    now[0] = 1059.0
    assert tasks.archive_if_due(clock=clock) is False  # within the minute: not even read, though still due
    now[0] = 1060.0
    assert tasks.archive_if_due(clock=clock) is True  # a minute on: read again
    assert submitted == [tasks.run_scheduled_archiver] * 2


def test_a_run_is_due_again_exactly_run_every_hours_after_the_last(db, monkeypatch, submitted):
    last = timezone.now() - timedelta(days=1)
    _enable(run_every_hours=6, last_run_at=last)
    monkeypatch.setattr(tasks.timezone, "now", lambda: last + timedelta(hours=6) - timedelta(microseconds=1))
    assert tasks.archive_if_due() is False
    monkeypatch.setattr(tasks.timezone, "now", lambda: last + timedelta(hours=6))
    assert tasks.archive_if_due() is True
    assert submitted == [tasks.run_scheduled_archiver]
    assert tasks.claim_run(now=last + timedelta(hours=6)) is True  # the claim agrees: due at that instant
