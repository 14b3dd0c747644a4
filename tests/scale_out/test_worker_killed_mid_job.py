"""An API job whose worker is SIGKILLed mid-job ends (issue 15): while the worker lives the job beats; once it is
killed, the scheduler's housekeeping (the real `manage.py simulate --scheduler`) finishes the job as failed, 503
`interrupted` with its reason, within the lease TTL and a few seconds, and the dead worker's compaction attempt is
interrupted and its lease freed within the same bound, so the session compacts again. A worker, the scheduler and a
TTL of 4 s; about 20 s."""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from celery import Celery

from compaction_app.engine.items import user_message
from compaction_app.models import CompactionAttempt
from compaction_app.records import STALE_ATTEMPT_MESSAGE
from sessions_app.compactions.services import do_compact_session
from sessions_app.jobs.liveness import JOB_LOST_MESSAGE
from sessions_app.models import Job, Session
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks, logs_under
from tests.scale_out.processes import (
    child_env,
    forget_queue,
    start_scheduler,
    start_worker,
    stop,
    wait_for_log,
)
from tests.scale_out.test_worker_killed_mid_compaction import history

SLOW_SECONDS = 30  # the simulated model answers after this long: the worker dies well inside it
DEADLINE_SECONDS = 60
TTL_SECONDS = 4
# housekeeping runs every 2 s; one more round and a second of slack for a loaded machine
ENDED_WITHIN = TTL_SECONDS + 2 * 2 + 1


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_was_killed_ends_interrupted_within_the_ttl(on_postgresql, redis_url, make_session,
                                                                       tmp_path):
    import redis

    session = make_session(items=[user_message("collect the deploy logs"), user_message("find the failing step")])
    deadlocks_before = database_deadlocks()
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    before = history(session.pk)
    job = Job.objects.create(kind="compaction", session=session, params={"strategy": "local"})
    queue = f"compactweb-test-{uuid.uuid4().hex[:8]}"
    logs = {name: tmp_path / f"{name}.log" for name in ("worker", "scheduler")}
    broker = Celery("compactweb-test", broker=redis_url, set_as_current=False)
    client = redis.Redis.from_url(redis_url)
    worker = scheduler = None
    try:
        env = {**child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path),
               "COMPACTWEB_LEASE_TTL_SECONDS": str(TTL_SECONDS)}
        worker = start_worker(queue=queue, env=env, log=logs["worker"])
        scheduler = start_scheduler(env=env, log=logs["scheduler"])
        wait_for_log(worker, logs["worker"], "ready")
        broker.send_task("sessions_app.jobs.tasks.run_job", queue=queue, kwargs={"job_id": job.pk})

        deadline = time.monotonic() + DEADLINE_SECONDS
        first_beat = None
        while first_beat is None:
            assert worker.poll() is None, f"the worker exited:\n{logs['worker'].read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the job never started:\n{logs['worker'].read_text()[-3000:]}"
            job.refresh_from_db()
            first_beat = job.heartbeat_at if job.status == "running" else None
            time.sleep(0.05)
        # The provider call outlasts the TTL: the live worker's job keeps beating, and nothing reaps it.
        while job.heartbeat_at == first_beat:
            assert time.monotonic() < deadline, "the job's heartbeat was never renewed"
            time.sleep(0.1)
            job.refresh_from_db()
        time.sleep(TTL_SECONDS)  # past one TTL since the job started: alive, so still running
        job.refresh_from_db()
        assert job.status == "running" and CompactionAttempt.objects.get(session=session).status == "running"

        stop(worker, sig=signal.SIGKILL)
        killed_at = time.monotonic()

        def ended_within_the_ttl(what: str, ended) -> float:
            # The job's heartbeat and the session's lease lapse on clocks of their own (each renewed every third of
            # the TTL), so the housekeeping round that ends one may come a round before the one that frees the other:
            # the scheduler stays up until both are seen.
            while not ended():
                assert scheduler.poll() is None, f"the scheduler exited:\n{logs['scheduler'].read_text()[-3000:]}"
                assert time.monotonic() - killed_at < ENDED_WITHIN, (
                    f"the dead worker's {what} was still running {ENDED_WITHIN}s after the kill:\n"
                    f"{logs['scheduler'].read_text()[-3000:]}")
                time.sleep(0.1)
            return time.monotonic() - killed_at

        def job_ended() -> bool:
            job.refresh_from_db()
            return job.status != "running"

        ended_after = ended_within_the_ttl("job", job_ended)
        ended_within_the_ttl(
            "attempt", lambda: CompactionAttempt.objects.get(session=session).status != "running")
    finally:
        for process in (worker, scheduler):
            if process is not None:
                stop(process, sig=signal.SIGKILL)
        forget_queue(client, queue)
        broker.close()

    assert (job.status, job.http_status) == ("failed", 503), ended_after
    assert job.result == {"error": {"code": "interrupted", "message": JOB_LOST_MESSAGE}}
    assert job.finished_at is not None
    assert history(session.pk) == before  # nothing of the dead compaction reached the history
    attempt = CompactionAttempt.objects.get(session=session)
    assert (attempt.status, attempt.error_message) == ("interrupted", STALE_ATTEMPT_MESSAGE)
    Session.objects.filter(pk=session.pk).update(fault_injection={})
    assert do_compact_session(session_id=session.pk, strategy="local") is not None  # the session is free again
    print(assert_fault_run_clean([session.pk], logs=logs_under(tmp_path), deadlocks_before=deadlocks_before))
