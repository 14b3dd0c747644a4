"""The per-session lease: one compaction, turn or rollback at a time, across processes, surviving dead holders."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.locks import LeaseLost, SessionBusy, acquire, release, session_lease
from sessions_app.models import Session


@pytest.mark.django_db
def test_second_taker_is_refused_with_the_running_purpose(session):
    with session_lease(session_id=session.pk, purpose="compaction"):
        with pytest.raises(SessionBusy) as busy:
            acquire(session_id=session.pk, purpose="turn")
    assert "compaction is running" in str(busy.value)


@pytest.mark.django_db
def test_lease_is_released_when_the_block_raises(session):
    with pytest.raises(RuntimeError):
        with session_lease(session_id=session.pk, purpose="turn"):
            raise RuntimeError("boom")
    lease = acquire(session_id=session.pk, purpose="turn")
    assert not lease.took_over_expired
    release(lease)


@pytest.mark.django_db
def test_expired_lease_of_a_dead_holder_is_taken_over(session):
    dead = acquire(session_id=session.pk, purpose="compaction")
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    taker = acquire(session_id=session.pk, purpose="compaction")
    assert taker.took_over_expired
    with pytest.raises(LeaseLost):
        dead.check()
    with pytest.raises(LeaseLost):
        dead.renew()
    taker.check()
    release(dead)  # a late release by the dead holder must not free the new holder's lease
    with pytest.raises(SessionBusy):
        acquire(session_id=session.pk, purpose="turn")


@pytest.mark.django_db
def test_unknown_session_is_not_reported_busy():
    with pytest.raises(Session.DoesNotExist):
        acquire(session_id=987654, purpose="turn")
