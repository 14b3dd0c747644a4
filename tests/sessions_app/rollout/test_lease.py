"""The per-session lease: one compaction, turn or rollback at a time, across processes, surviving dead holders."""

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from compaction_app.models import CompactionAttempt
from compaction_app.records import STALE_ATTEMPT_MESSAGE
from sessions_app.models import Session
from sessions_app.rollout.lease import (
    LeaseLost,
    LeaseNotFree,
    SessionBusy,
    acquire,
    keep_renewed,
    planned,
    reap_expired,
    release,
    session_lease,
)


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


def running_attempt(session) -> CompactionAttempt:
    return CompactionAttempt.objects.create(
        session=session, trigger="manual", reason="user_requested", implementation="responses",
        phase="standalone_turn", strategy="local", started_at=timezone.now(),
    )


@pytest.mark.django_db
@pytest.mark.parametrize("purpose", ["turn", "simulator step", "rollback", "compaction"])
def test_taking_over_an_expired_lease_finishes_the_dead_holders_attempt_as_interrupted(session, purpose):
    acquire(session_id=session.pk, purpose="compaction")
    dead = running_attempt(session)
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    release(acquire(session_id=session.pk, purpose=purpose))

    dead.refresh_from_db()
    assert (dead.status, dead.error_kind, dead.error_message) == ("interrupted", "interrupted", STALE_ATTEMPT_MESSAGE)
    assert dead.completed_at is not None


@pytest.mark.django_db
def test_a_taker_refused_by_a_live_lease_leaves_the_running_attempt_alone(session):
    acquire(session_id=session.pk, purpose="compaction")
    alive = running_attempt(session)

    with pytest.raises(SessionBusy):
        acquire(session_id=session.pk, purpose="turn")

    alive.refresh_from_db()
    assert alive.status == "running" and alive.completed_at is None


@pytest.mark.django_db
def test_the_lease_lasts_the_ttl_setting(session, settings):
    settings.COMPACTWEB_LEASE_TTL_SECONDS = 7
    before = timezone.now()
    lease = acquire(session_id=session.pk, purpose="turn")
    after = timezone.now()

    expires = Session.objects.get(pk=session.pk).lease_expires_at
    assert lease.ttl == timedelta(seconds=7)
    assert before + timedelta(seconds=7) <= expires <= after + timedelta(seconds=7)


def lease_expiry(session_id: int):
    return Session.objects.filter(pk=session_id).values_list("lease_expires_at", flat=True).get()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_holder_busy_longer_than_the_ttl_keeps_its_lease_by_renewing_it(session):
    lease = await sync_to_async(acquire)(session_id=session.pk, purpose="compaction", ttl=timedelta(seconds=0.6))
    first = await sync_to_async(lease_expiry)(session.pk)

    async with keep_renewed(lease):
        await asyncio.sleep(1.5)  # a provider call longer than the TTL

    assert await sync_to_async(lease_expiry)(session.pk) > first + timedelta(seconds=0.5)
    with pytest.raises(SessionBusy):
        await sync_to_async(acquire)(session_id=session.pk, purpose="turn")
    await sync_to_async(lease.check)()


@pytest.mark.django_db
def test_reaping_frees_expired_leases_and_interrupts_their_attempts_but_not_live_ones(make_session):
    dead_session, live_session = make_session(), make_session()
    acquire(session_id=dead_session.pk, purpose="compaction")
    acquire(session_id=live_session.pk, purpose="compaction")
    dead, alive = running_attempt(dead_session), running_attempt(live_session)
    Session.objects.filter(pk=dead_session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    assert reap_expired() == [dead_session.pk]

    dead.refresh_from_db()
    alive.refresh_from_db()
    assert (dead.status, dead.error_message) == ("interrupted", STALE_ATTEMPT_MESSAGE)
    assert alive.status == "running"
    assert Session.objects.get(pk=dead_session.pk).lease_holder == ""
    assert Session.objects.get(pk=live_session.pk).lease_holder != ""
    release(acquire(session_id=dead_session.pk, purpose="turn"))  # free for the next taker, nothing to take over


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_only_a_lease_take_of_its_own_commits_without_waiting_for_the_disk(session, monkeypatch):
    from django.db import connection, transaction

    from sessions_app.rollout import lease as leases

    if connection.vendor != "postgresql":
        pytest.skip("synchronous_commit is a PostgreSQL setting; SQLite's commits are the same for every write")

    def synchronous_commit() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    seen = []
    real_take = leases._take_free

    def take(**kwargs):
        taken = real_take(**kwargs)
        seen.append(synchronous_commit())
        return taken

    monkeypatch.setattr(leases, "_take_free", take)
    durable = synchronous_commit()
    release(acquire(session_id=session.pk, purpose="turn"))
    assert seen == ["off"]  # inside the lease's own transaction (SET LOCAL)
    assert synchronous_commit() == durable != "off"  # the rollout's appends still wait for the disk
    with transaction.atomic():  # a caller's transaction: its other writes must stay durable
        release(acquire(session_id=session.pk, purpose="turn"))
        assert seen == ["off", durable]


@pytest.mark.django_db
@pytest.mark.parametrize("other", ["leased", "written"])
def test_a_write_that_takes_the_lease_refuses_a_session_leased_or_written_since_it_was_read(
        make_session, items_factory, other):
    from sessions_app.models import RolloutLine
    from sessions_app.rollout.services import LeaseTerms, NewLine, append_rollout_lines, do_append_items

    session = make_session()
    read = Session.objects.get(pk=session.pk)  # what the writer decided on
    if other == "leased":
        held = acquire(session_id=session.pk, purpose="compaction")
    else:
        do_append_items(session=Session.objects.get(pk=session.pk), items=[items_factory.user("meanwhile")])
    count = RolloutLine.objects.filter(session=session).count()

    with pytest.raises(LeaseNotFree):
        append_rollout_lines(session=read, lines=[NewLine("response_item", items_factory.user("mine"))],
                             lease=LeaseTerms(take=planned(session_id=session.pk, purpose="turn")))

    assert RolloutLine.objects.filter(session=session).count() == count
    assert Session.objects.get(pk=session.pk).lease_holder == (held.holder if other == "leased" else "")


@pytest.mark.django_db
def test_a_write_that_takes_the_lease_holds_it_for_the_next_writes(make_session, items_factory):
    from sessions_app.rollout.services import LeaseTerms, NewLine, append_rollout_lines

    session = make_session()
    lease = planned(session_id=session.pk, purpose="turn")

    append_rollout_lines(session=session, lines=[NewLine("response_item", items_factory.user("mine"))],
                         lease=LeaseTerms(take=lease))

    stored = Session.objects.get(pk=session.pk)
    assert (stored.lease_holder, stored.lease_purpose) == (lease.holder, "turn") and stored.lease_expires_at
    lease.check()  # ours
    with pytest.raises(SessionBusy):
        acquire(session_id=session.pk, purpose="compaction")
    release(lease)
