"""The lease's rules one by one, each with the bug it stops (issue 43: a planted bug dies in the lease room):
who may take a session, what a takeover and a reap tell the other rooms, what a lost holder can no longer do, and
how a holder keeps its lease while it works."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app.models import Session
from sessions_app.rollout.lease import (
    FOLLOWED_SOURCE,
    IMPORTING_SOURCE,
    LeaseLost,
    SessionBusy,
    SessionReadOnly,
    acquire,
    keep_renewed,
    lease_ttl,
    planned,
    reap_expired,
    refuse_if_followed,
    release,
)
from sessions_app.rollout.signals import holder_lost


def expire(session_id: int, *, seconds_ago: float = 1) -> None:
    Session.objects.filter(pk=session_id).update(lease_expires_at=timezone.now() - timedelta(seconds=seconds_ago))


def lease_row(session_id: int) -> tuple:
    return Session.objects.filter(pk=session_id).values_list(
        "lease_holder", "lease_purpose", "lease_expires_at").get()


@pytest.fixture
def lost_holders():
    """The session ids holder_lost was sent for, in order."""
    heard: list[int] = []

    def hear(sender, session_id, **kwargs):
        heard.append(session_id)

    holder_lost.connect(hear)
    yield heard
    holder_lost.disconnect(hear)


@pytest.mark.django_db
@pytest.mark.parametrize("source", [FOLLOWED_SOURCE, IMPORTING_SOURCE])
def test_a_followed_or_importing_session_is_never_leased_and_says_why(session, source):
    Session.objects.filter(pk=session.pk).update(source=source)
    with pytest.raises(SessionReadOnly) as refused:
        acquire(session_id=session.pk, purpose="turn")
    assert refused.value.code == "read_only" and refused.value.session_id == session.pk
    assert str(refused.value) == (f"session {session.pk} follows a Codex rollout file and is read-only in "
                                  "compactweb")
    with pytest.raises(SessionReadOnly):
        refuse_if_followed(session_id=session.pk)
    assert lease_row(session.pk) == ("", "", None)


@pytest.mark.django_db
def test_a_followed_session_with_an_expired_lease_is_not_taken_over(session):
    acquire(session_id=session.pk, purpose="turn")
    Session.objects.filter(pk=session.pk).update(source=FOLLOWED_SOURCE)
    expire(session.pk)
    holder = lease_row(session.pk)[0]
    with pytest.raises(SessionReadOnly):
        acquire(session_id=session.pk, purpose="compaction")
    assert lease_row(session.pk)[0] == holder


@pytest.mark.django_db
def test_a_session_of_ones_own_is_writable(session):
    refuse_if_followed(session_id=session.pk)  # no raise
    refuse_if_followed(session_id=987654)  # an unknown session is not read-only: the caller finds it missing


@pytest.mark.django_db
def test_a_free_take_records_holder_purpose_and_expiry_and_is_no_takeover(session, lost_holders):
    before = timezone.now()
    lease = acquire(session_id=session.pk, purpose="rollback", ttl=timedelta(seconds=40))
    holder, purpose, expires = lease_row(session.pk)
    assert (holder, purpose) == (lease.holder, "rollback") and len(holder) == 32
    assert before + timedelta(seconds=40) <= expires <= timezone.now() + timedelta(seconds=40)
    assert (lease.session_id, lease.purpose, lease.ttl, lease.took_over_expired) == (
        session.pk, "rollback", timedelta(seconds=40), False)
    assert lost_holders == []


@pytest.mark.django_db
def test_two_takes_get_different_holders(make_session):
    first, second = make_session(), make_session()
    assert acquire(session_id=first.pk, purpose="turn").holder != acquire(session_id=second.pk, purpose="turn").holder


@pytest.mark.django_db
def test_a_busy_session_names_what_holds_it_or_another_operation(session):
    acquire(session_id=session.pk, purpose="simulator step")
    with pytest.raises(SessionBusy) as busy:
        acquire(session_id=session.pk, purpose="turn")
    assert (busy.value.code, busy.value.session_id, busy.value.purpose) == ("busy", session.pk, "simulator step")
    assert str(busy.value) == f"session {session.pk} is busy: a simulator step is running; try again when it ends"
    Session.objects.filter(pk=session.pk).update(lease_purpose="")
    with pytest.raises(SessionBusy) as unnamed:
        acquire(session_id=session.pk, purpose="turn")
    assert unnamed.value.purpose == "another operation"
    assert str(unnamed.value) == (f"session {session.pk} is busy: another operation is running; "
                                  "try again when it ends")


@pytest.mark.django_db
def test_a_live_lease_is_not_taken_over_even_a_moment_before_it_expires(session, lost_holders):
    first = acquire(session_id=session.pk, purpose="compaction")
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=5))
    with pytest.raises(SessionBusy):
        acquire(session_id=session.pk, purpose="turn")
    assert lease_row(session.pk)[:2] == (first.holder, "compaction") and lost_holders == []


@pytest.mark.django_db
def test_a_takeover_takes_the_lease_for_the_new_holder_and_tells_the_other_rooms(session, lost_holders):
    dead = acquire(session_id=session.pk, purpose="compaction")
    expire(session.pk)
    before = timezone.now()
    taker = acquire(session_id=session.pk, purpose="turn", ttl=timedelta(seconds=20))
    holder, purpose, expires = lease_row(session.pk)
    assert taker.took_over_expired and holder == taker.holder != dead.holder and purpose == "turn"
    assert before + timedelta(seconds=20) <= expires <= timezone.now() + timedelta(seconds=20)
    assert lost_holders == [session.pk]


@pytest.mark.django_db
def test_a_lost_holder_can_neither_renew_check_nor_release_the_new_holders_lease(session):
    dead = acquire(session_id=session.pk, purpose="compaction")
    expire(session.pk)
    taker = acquire(session_id=session.pk, purpose="turn")
    with pytest.raises(LeaseLost, match=f"the lease on session {session.pk} was lost"):
        dead.renew()
    with pytest.raises(LeaseLost, match=f"the lease on session {session.pk} was lost"):
        dead.check()
    release(dead)
    assert lease_row(session.pk)[:2] == (taker.holder, "turn")
    taker.check()


@pytest.mark.django_db
def test_renewing_pushes_the_expiry_a_whole_ttl_from_now(session):
    lease = acquire(session_id=session.pk, purpose="turn", ttl=timedelta(seconds=30))
    expire(session.pk, seconds_ago=-1)  # a second left
    before = timezone.now()
    lease.renew()
    expires = lease_row(session.pk)[2]
    assert before + timedelta(seconds=30) <= expires <= timezone.now() + timedelta(seconds=30)
    assert lease_row(session.pk)[0] == lease.holder


@pytest.mark.django_db
def test_release_frees_the_session_whole(session):
    lease = acquire(session_id=session.pk, purpose="turn")
    release(lease)
    assert lease_row(session.pk) == ("", "", None)
    assert not acquire(session_id=session.pk, purpose="turn").took_over_expired


@pytest.mark.django_db
def test_a_planned_lease_takes_nothing_yet_and_lasts_the_ttl_setting(session, settings):
    settings.COMPACTWEB_LEASE_TTL_SECONDS = 9
    first, second = planned(session_id=session.pk, purpose="turn"), planned(session_id=session.pk, purpose="turn")
    assert (first.session_id, first.purpose, first.ttl) == (session.pk, "turn", timedelta(seconds=9))
    assert first.holder != second.holder and len(first.holder) == 32
    assert not first.took_over_expired
    assert planned(session_id=session.pk, purpose="turn", ttl=timedelta(seconds=2)).ttl == timedelta(seconds=2)
    assert lease_row(session.pk) == ("", "", None)


@pytest.mark.django_db
def test_reaping_goes_by_the_time_it_is_given_and_tells_the_other_rooms(make_session, lost_holders):
    held, free = make_session(), make_session()
    acquire(session_id=held.pk, purpose="compaction", ttl=timedelta(seconds=30))
    assert reap_expired() == [] and lost_holders == []
    # The same lease seen from a minute on: expired, freed whole, its holder reported lost.
    assert reap_expired(now=timezone.now() + timedelta(minutes=1)) == [held.pk]
    assert lease_row(held.pk) == ("", "", None) and lost_holders == [held.pk]
    assert lease_row(free.pk) == ("", "", None)


@pytest.mark.django_db
def test_reaping_leaves_a_session_nobody_holds_alone(session, lost_holders):
    # An expiry left without a holder (a hand edit, an older version's row) is no lease: nothing to reap.
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    assert reap_expired() == [] and lost_holders == []


@pytest.mark.django_db
def test_taking_leaves_an_expiry_without_a_holder_as_a_free_session(session, lost_holders):
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    lease = acquire(session_id=session.pk, purpose="turn")
    assert not lease.took_over_expired and lost_holders == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_holder_that_lost_its_lease_stops_renewing_and_says_so_once(session, caplog):
    lease = await sync_to_async(acquire)(session_id=session.pk, purpose="compaction", ttl=timedelta(seconds=0.3))
    await sync_to_async(expire)(session.pk)
    taker = await sync_to_async(acquire)(session_id=session.pk, purpose="turn")
    with caplog.at_level(logging.WARNING, logger="sessions_app.rollout.lease"):
        async with keep_renewed(lease):
            await asyncio.sleep(0.8)  # several renewal intervals
    lost = [r for r in caplog.records if "was lost while its compaction ran" in r.getMessage()]
    assert len(lost) == 1 and f"session {session.pk}" in lost[0].getMessage()
    assert (await sync_to_async(lease_row)(session.pk))[0] == taker.holder


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_renewal_that_fails_for_a_database_blip_is_tried_again(session, monkeypatch, caplog):
    lease = await sync_to_async(acquire)(session_id=session.pk, purpose="compaction", ttl=timedelta(seconds=0.6))
    first = await sync_to_async(lambda: lease_row(session.pk)[2])()
    calls = []
    renew = type(lease).renew

    def flaky(self):
        calls.append(1)
        if len(calls) == 1:
            raise OSError("the database did not answer")
        renew(self)

    monkeypatch.setattr(type(lease), "renew", flaky)
    with caplog.at_level(logging.ERROR, logger="sessions_app.rollout.lease"):
        async with keep_renewed(lease):
            await asyncio.sleep(0.75)  # three intervals of 0.2 s: a failed renewal, then good ones
    assert len(calls) >= 2
    assert any("could not renew the lease" in r.getMessage() for r in caplog.records)
    assert (await sync_to_async(lambda: lease_row(session.pk)[2])()) > first


@pytest.mark.asyncio
async def test_keeping_no_lease_renewed_runs_the_block_and_nothing_else():
    ran = []
    async with keep_renewed(None):
        ran.append(1)
    assert ran == [1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_renewing_stops_when_the_block_ends(session):
    lease = await sync_to_async(acquire)(session_id=session.pk, purpose="compaction", ttl=timedelta(seconds=0.3))
    async with keep_renewed(lease):
        await asyncio.sleep(0.15)
    ended = await sync_to_async(lambda: lease_row(session.pk)[2])()
    await asyncio.sleep(0.35)
    assert (await sync_to_async(lambda: lease_row(session.pk)[2])()) == ended


def test_without_the_setting_a_lease_lasts_thirty_seconds(settings):
    del settings.COMPACTWEB_LEASE_TTL_SECONDS
    assert lease_ttl() == timedelta(seconds=30)
    settings.COMPACTWEB_LEASE_TTL_SECONDS = "12.5"  # from the environment, a string
    assert lease_ttl() == timedelta(seconds=12.5)


@pytest.mark.django_db
def test_a_refused_take_touches_no_other_sessions_expired_lease(make_session, lost_holders):
    busy, dead = make_session(), make_session()
    live = acquire(session_id=busy.pk, purpose="compaction")
    stale = acquire(session_id=dead.pk, purpose="turn")
    expire(dead.pk)
    with pytest.raises(SessionBusy):
        acquire(session_id=busy.pk, purpose="turn")
    assert lease_row(busy.pk)[0] == live.holder and lease_row(dead.pk)[0] == stale.holder
    assert lost_holders == []


@pytest.mark.django_db
def test_an_unknown_session_is_named_in_the_refusal():
    with pytest.raises(Session.DoesNotExist, match="no session 987654"):
        acquire(session_id=987654, purpose="turn")
