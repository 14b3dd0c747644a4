"""A compaction whose install meets a full or read-only database (issue 31): nothing is installed, and the attempt
does not stay `running` for good: once the database takes writes again it ends as failed (kind
`database_unavailable`), the session free; when the database stays away past the lease's TTL the lease is kept,
and its expiry ends the attempt as interrupted (the reaper). The fault is injected at the install's write."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt
from compactweb import db_outage
from sessions_app.compactions import services
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import lease as locks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def full_disk_at_install(monkeypatch):
    def install(*args, **kwargs):
        raise OperationalError("database or disk is full")

    monkeypatch.setattr(services, "_install", install)
    monkeypatch.setattr(db_outage, "RETRY_SECONDS", 0.0)


@pytest.fixture
def api_session(make_session):
    return make_session(items=[user_message("compact this"), user_message("and this")])


def test_an_install_the_full_disk_refused_ends_its_attempt_once_space_returns(api_session, full_disk_at_install):
    lines_before = RolloutLine.objects.filter(session=api_session, kind="compacted").count()

    with pytest.raises(OperationalError):
        services.do_compact_session(session_id=api_session.pk, strategy="local")

    attempt = CompactionAttempt.objects.get(session=api_session)
    assert attempt.status == CompactionAttempt.Status.FAILED
    assert attempt.error_kind == services.DATABASE_UNAVAILABLE_KIND and "disk is full" in attempt.error_message
    assert Session.objects.get(pk=api_session.pk).lease_holder == ""
    assert not Compaction.objects.filter(session=api_session).exists()
    assert RolloutLine.objects.filter(session=api_session, kind="compacted").count() == lines_before


def test_a_database_that_stays_away_leaves_the_lease_whose_expiry_ends_the_attempt(
        api_session, full_disk_at_install, monkeypatch, settings):
    settings.COMPACTWEB_LEASE_TTL_SECONDS = 0.05

    def still_full():
        raise OperationalError("database or disk is full")

    monkeypatch.setattr(db_outage, "check_writable", still_full)

    with pytest.raises(OperationalError):
        services.do_compact_session(session_id=api_session.pk, strategy="local")

    attempt = CompactionAttempt.objects.get(session=api_session)
    assert attempt.status == CompactionAttempt.Status.RUNNING
    assert Session.objects.get(pk=api_session.pk).lease_holder != ""  # kept: its expiry is the way out
    assert locks.reap_expired(now=timezone.now() + timedelta(seconds=1)) == [api_session.pk]
    attempt.refresh_from_db()
    assert attempt.status == CompactionAttempt.Status.INTERRUPTED
