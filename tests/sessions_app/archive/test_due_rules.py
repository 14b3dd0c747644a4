"""What keeps a session from retention, one rule at a time (issue 43: a planted bug dies in the archive room): each
case below is an old, ended session but for one thing, and the archiver leaves it; the same session without that
thing is archived."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.archive import selectors, services
from sessions_app.models import Job, Session, SessionArchive, SimulatorRun

pytestmark = pytest.mark.django_db


def _behind_a_gateway_session(session):
    from gateway_app.models import GatewaySession
    from tests.gateway_app.conftest import make_route

    GatewaySession.objects.create(session=session, route=make_route(), client_name="codex", group_key="thread:t1")


def _leased(session, *, seconds: float):
    Session.objects.filter(pk=session.pk).update(lease_holder="worker-1", lease_purpose="turn",
                                                 lease_expires_at=timezone.now() + timedelta(seconds=seconds))


KEPT = {
    "behind a gateway session": _behind_a_gateway_session,
    "followed from a file": lambda s: Session.objects.filter(pk=s.pk).update(source="followed"),
    "importing": lambda s: Session.objects.filter(pk=s.pk).update(source="importing"),
    "a queued job": lambda s: Job.objects.create(kind=Job.Kind.COMPACTION, session=s),
    "a running job": lambda s: Job.objects.create(kind=Job.Kind.COMPACTION, session=s, status=Job.Status.RUNNING),
    "a running simulator": lambda s: SimulatorRun.objects.create(session=s, scenario="fix-failing-test"),
    "a paused simulator": lambda s: SimulatorRun.objects.create(session=s, scenario="fix-failing-test",
                                                              status=SimulatorRun.Status.PAUSED),
    "a live lease": lambda s: _leased(s, seconds=30),
}


@pytest.mark.parametrize("reason", list(KEPT))
def test_an_old_ended_session_stays_while_something_still_needs_it(make_session, age, reason):
    kept = age(make_session(title="kept"), state=Session.State.IDLE)
    KEPT[reason](kept)
    due = age(make_session(title="due"), state=Session.State.IDLE)

    run = services.do_run_archiver(trigger="test", days=30)

    assert list(SessionArchive.objects.values_list("session_id", flat=True)) == [due.pk] and run.due == 1
    assert Session.objects.filter(pk=kept.pk).exists() and not Session.objects.filter(pk=due.pk).exists()
    assert not selectors.is_due(session_id=kept.pk, cutoff=timezone.now(), now=timezone.now())


GONE = {
    "an expired lease of a dead holder": lambda s: _leased(s, seconds=-30),
    "a finished job": lambda s: Job.objects.create(kind=Job.Kind.COMPACTION, session=s, status=Job.Status.SUCCEEDED),
    "a failed job": lambda s: Job.objects.create(kind=Job.Kind.COMPACTION, session=s, status=Job.Status.FAILED),
    "a job of another session": lambda s: Job.objects.create(kind=Job.Kind.IMPORT),
    "a stopped simulator": lambda s: SimulatorRun.objects.create(session=s, scenario="fix-failing-test",
                                                               status=SimulatorRun.Status.STOPPED),
    "a finished simulator": lambda s: SimulatorRun.objects.create(session=s, scenario="fix-failing-test",
                                                                status=SimulatorRun.Status.FINISHED),
}


@pytest.mark.parametrize("reason", list(GONE))
def test_an_old_ended_session_goes_when_what_touched_it_is_over(make_session, age, reason):
    session = age(make_session(title="old"), state=Session.State.IDLE)
    GONE[reason](session)
    assert selectors.is_due(session_id=session.pk, cutoff=timezone.now(), now=timezone.now())
    run = services.do_run_archiver(trigger="test", days=30)
    assert run.archived == 1 and not Session.objects.filter(pk=session.pk).exists()


@pytest.mark.parametrize("state", [Session.State.IDLE, Session.State.STOPPED, Session.State.FAILED])
def test_every_ended_state_is_due(make_session, age, state):
    session = age(make_session(title=state), state=state)
    assert selectors.due_session_ids(cutoff=timezone.now(), now=timezone.now(), limit=10) == [session.pk]


def test_the_cutoff_is_strict_and_the_longest_idle_go_first(make_session, age):
    newer, older, oldest = (age(make_session(title=str(d)), days=d) for d in (31, 40, 50))
    cutoff = Session.objects.get(pk=newer.pk).updated_at
    assert selectors.due_session_ids(cutoff=cutoff, now=timezone.now(), limit=10) == [oldest.pk, older.pk]
    assert selectors.due_session_ids(cutoff=cutoff, now=timezone.now(), limit=1) == [oldest.pk]
