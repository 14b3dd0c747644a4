"""SIGKILL of a Celery worker in the middle of a compaction loses nothing (issues 8 and 15, spec §6.5): while the
worker lives it renews its short lease through a provider call longer than the TTL; once killed, the history is
exactly as before, the attempt stays `running` and the session held until the lease's TTL runs out (no later than
TTL after the kill); then the next compaction takes the session over, succeeds, and marks the dead worker's attempt
interrupted. About 20 s: a worker start and two TTLs of 4 s."""

from __future__ import annotations

import signal
import time
import uuid
from datetime import timedelta

import pytest
from celery import Celery
from django.utils import timezone

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt
from compaction_app.records import STALE_ATTEMPT_MESSAGE
from sessions_app.compactions.services import do_compact_session
from sessions_app.models import LiveItem, RolloutLine, Session
from sessions_app.rollout.lease import SessionBusy
from sessions_app.rollout.services import verify_projection
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks, logs_under
from tests.scale_out.processes import (
    child_env,
    forget_queue,
    send_compaction_job,
    start_worker,
    stop,
    wait_for_log,
)

# The simulated model answers after this long: the worker is killed well inside it, after renewing its lease.
SLOW_SECONDS = 30
DEADLINE_SECONDS = 60
TTL_SECONDS = 4
CLOCK_SLACK = timedelta(seconds=1)


def history(session_id: int) -> dict:
    session = Session.objects.get(pk=session_id)
    return {
        "items": list(LiveItem.objects.filter(session_id=session_id).order_by("position").values_list("item", flat=True)),
        "lines": list(RolloutLine.objects.filter(session_id=session_id).order_by("seq").values_list("seq", "kind")),
        "last_seq": session.last_seq, "tokens": session.tokens_in_window, "window": session.window_number,
    }


def lease_of(session_id: int):
    return Session.objects.filter(pk=session_id).values_list("lease_holder", "lease_expires_at").get()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_compaction_leaves_history_unchanged_and_the_next_compaction_takes_over(
    on_postgresql, redis_url, make_session, tmp_path
):
    import redis

    session = make_session(items=[user_message("collect the deploy logs"), user_message("find the failing step")])
    deadlocks_before = database_deadlocks()
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    before = history(session.pk)
    queue = f"compactweb-test-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    broker = Celery("compactweb-test", broker=redis_url, set_as_current=False)
    client = redis.Redis.from_url(redis_url)
    worker = None
    try:
        env = {**child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path),
               "COMPACTWEB_LEASE_TTL_SECONDS": str(TTL_SECONDS)}
        worker = start_worker(queue=queue, env=env, log=log)
        wait_for_log(worker, log, "ready")
        send_compaction_job(broker, session_id=session.pk, queue=queue)
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not CompactionAttempt.objects.filter(session=session, status="running").exists():
            assert worker.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the compaction never started:\n{log.read_text()[-3000:]}"
            time.sleep(0.05)
        holder, first_expiry = lease_of(session.pk)
        assert first_expiry - timezone.now() <= timedelta(seconds=TTL_SECONDS)  # the setting reached the worker
        # The provider call outlasts the TTL: the live worker keeps the session by renewing its lease.
        while timezone.now() < first_expiry + CLOCK_SLACK:
            assert time.monotonic() < deadline, "the worker's lease was never renewed"
            time.sleep(0.1)
        assert lease_of(session.pk)[0] == holder and lease_of(session.pk)[1] > first_expiry
        stop(worker, sig=signal.SIGKILL)
        killed_at = timezone.now()
        assert worker.returncode == -signal.SIGKILL
    finally:
        if worker is not None:
            stop(worker, sig=signal.SIGKILL)
        forget_queue(client, queue)
        broker.close()

    # Nothing of the dead compaction reached the history; the system has not noticed yet.
    assert history(session.pk) == before
    attempt = CompactionAttempt.objects.get(session=session)
    assert attempt.status == "running" and attempt.completed_at is None
    assert Session.objects.get(pk=session.pk).lease_holder != ""
    Session.objects.filter(pk=session.pk).update(fault_injection={})
    with pytest.raises(SessionBusy, match="a compaction is running"):
        do_compact_session(session_id=session.pk, strategy="local")  # inside the TTL: still the dead worker's

    # The dead worker's lease runs out no later than one TTL after the kill; the next compaction takes over.
    _, expiry = lease_of(session.pk)
    assert expiry <= killed_at + timedelta(seconds=TTL_SECONDS) + CLOCK_SLACK
    while timezone.now() <= expiry:
        time.sleep(0.1)
    compaction = do_compact_session(session_id=session.pk, strategy="local")
    attempt.refresh_from_db()
    assert attempt.status == "interrupted" and attempt.error_message == STALE_ATTEMPT_MESSAGE
    assert attempt.completed_at is not None and attempt.compaction_id is None
    assert CompactionAttempt.objects.get(compaction=compaction).status == "completed"
    assert list(Compaction.objects.filter(session=session)) == [compaction]
    after = history(session.pk)
    assert after["lines"][: len(before["lines"])] == before["lines"]  # appended to, never rewritten
    assert RolloutLine.objects.filter(session=session, kind="compacted").count() == 1
    assert Session.objects.get(pk=session.pk).lease_holder == ""
    assert verify_projection(session=Session.objects.get(pk=session.pk)) == []
    print(assert_fault_run_clean([session.pk], logs=logs_under(tmp_path), deadlocks_before=deadlocks_before))
