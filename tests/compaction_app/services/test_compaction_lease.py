"""One compaction at a time per session (design: concurrency): a second request is refused with a clear message,
a dead worker's expired lease is taken over and its attempt marked interrupted, and items that arrive while a
compaction runs are not lost: they follow the replacement history."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt, Hook
from compaction_app.records import STALE_ATTEMPT_MESSAGE
from sessions_app.compactions.queue import CompactionRequestRefused
from sessions_app.compactions.services import do_compact_session
from sessions_app.jobs.tasks import do_request_compaction
from sessions_app.models import LiveItem, RolloutLine, Session
from sessions_app.rollout.lease import SessionBusy, acquire, release
from sessions_app.rollout.services import do_append_items, verify_projection

U1 = user_message("compile the release notes")
LATE = user_message("one more thing: mention the API change")


def live(session) -> list[dict]:
    return list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))


async def append_late_message(request: dict) -> None:
    """A PreCompact hook standing in for a user posting a message while the compaction runs (after the
    snapshot). Async, so the append runs through sync_to_async like any database call from the engine's loop."""

    def append() -> None:
        session = Session.objects.get(thread_id=request["session_id"])
        do_append_items(session=session, items=[LATE])

    await sync_to_async(append)()


@pytest.mark.django_db
def test_a_second_compaction_is_refused_while_the_lease_is_held(session, observable_state):
    before = observable_state(session)
    lease = acquire(session_id=session.pk, purpose="compaction")
    try:
        with pytest.raises(SessionBusy) as busy:
            do_compact_session(session_id=session.pk, strategy="local")
        with pytest.raises(CompactionRequestRefused, match="running already"):
            do_request_compaction(session_id=session.pk, actor=None, strategy="local")
    finally:
        release(lease)
    assert str(busy.value) == f"session {session.pk} is busy: a compaction is running; try again when it ends"
    assert not CompactionAttempt.objects.filter(session=session).exists()
    assert observable_state(session) == before


@pytest.mark.django_db(transaction=True)
def test_a_real_concurrent_compaction_is_refused_while_a_slow_one_runs(make_session):
    session = make_session(items=[U1])
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": "slow=0.6"})
    results: dict[str, object] = {}

    def first() -> None:
        try:
            results["first"] = do_compact_session(session_id=session.pk, strategy="local")
        except BaseException as exc:  # reported by the assertion below
            results["first"] = exc
        finally:
            connection.close()

    worker = threading.Thread(target=first)
    worker.start()
    deadline = time.monotonic() + 5
    while not Session.objects.filter(pk=session.pk).exclude(lease_holder="").exists():
        assert time.monotonic() < deadline, "the first compaction never took the lease"
        time.sleep(0.01)
    with pytest.raises(SessionBusy, match="a compaction is running"):
        do_compact_session(session_id=session.pk, strategy="local")
    worker.join(timeout=10)
    assert isinstance(results.get("first"), Compaction), results.get("first")
    assert Compaction.objects.filter(session=session).count() == 1
    assert CompactionAttempt.objects.filter(session=session).count() == 1
    assert Session.objects.get(pk=session.pk).lease_holder == ""


@pytest.mark.django_db
def test_an_expired_lease_of_a_dead_worker_is_taken_over_and_its_attempt_marked_interrupted(session):
    acquire(session_id=session.pk, purpose="compaction")  # the dead worker never releases it
    stale = CompactionAttempt.objects.create(
        session=session, trigger="manual", reason="user_requested", implementation="responses",
        phase="standalone_turn", strategy="local", started_at=timezone.now() - timedelta(minutes=20),
    )
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    result = do_compact_session(session_id=session.pk, strategy="token_budget")
    stale.refresh_from_db()
    assert stale.status == "interrupted" and stale.error_message == STALE_ATTEMPT_MESSAGE
    assert stale.completed_at is not None
    assert CompactionAttempt.objects.get(compaction=result).status == "completed"
    assert Session.objects.get(pk=session.pk).lease_holder == ""


@pytest.mark.django_db
def test_items_appended_during_a_compaction_follow_the_replacement_history(make_session, policy):
    hook = Hook.objects.create(
        name="late-user", event="pre_compact", kind="callable",
        target="tests.compaction_app.services.test_compaction_lease.append_late_message",
    )
    policy.hooks.add(hook)
    session = make_session(items=[U1])
    result = do_compact_session(session_id=session.pk, strategy="local")
    session.refresh_from_db()
    history = live(session)
    assert history[0] == U1 and history[-1] == LATE
    assert history[1]["content"][0]["text"].startswith("Another language model")
    late_line = RolloutLine.objects.get(session=session, kind="response_item", payload=LATE)
    assert late_line.seq < result.rollout_seq
    assert verify_projection(session=session) == []
    # The meter counts the late message too: it is part of the installed history.
    assert result.tokens_after == session.tokens_in_window
