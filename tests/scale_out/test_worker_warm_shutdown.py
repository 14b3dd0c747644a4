"""A worker that gets TERM while a task runs shuts down warm (issue 31): the running compaction finishes and is
installed, the worker then exits cleanly without taking the task queued behind it, and that task runs on the next
worker, so nothing is lost. The worker runs as scripts/scale-out runs it (prefork, concurrency 1) and
gets TERM on its main process only, as supervisord sends it there (`stopasgroup=false` for workers). Every wait is
on a condition (the job's status, the process's exit), bounded only by the test's own timeout."""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from celery import Celery

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt
from sessions_app.models import Job, Session
from tests.scale_out.processes import (
    child_env,
    forget_queue,
    send_compaction_job,
    start_worker,
    stop,
    wait_for_log,
)

SLOW_SECONDS = 5  # the simulated model answers after this long: TERM arrives while the compaction waits for it


def _until(condition, what: str, *processes) -> None:
    """Wait for `condition`, failing at once (with its log) if a process the wait depends on exits."""
    while not condition():
        for process, log in processes:
            assert process.poll() is None, f"{what}: the process exited:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


def _job(job_id: int) -> Job:
    return Job.objects.get(pk=job_id)


@pytest.mark.services
@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_a_worker_given_term_mid_task_finishes_it_and_leaves_the_next_task_to_the_next_worker(
    on_postgresql, redis_url, make_session, tmp_path
):
    import redis

    sessions = [make_session(items=[user_message(f"collect the deploy logs {n}"), user_message("find the step")])
                for n in range(2)]
    Session.objects.filter(pk__in=[s.pk for s in sessions]).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    queue = f"compactweb-test-{uuid.uuid4().hex[:8]}"
    broker = Celery("compactweb-test", broker=redis_url, set_as_current=False)
    client = redis.Redis.from_url(redis_url)
    env = child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path)
    first_log, second_log = tmp_path / "worker-1.log", tmp_path / "worker-2.log"
    first = second = None
    try:
        first = start_worker(queue=queue, env=env, log=first_log, pool="prefork", concurrency=1)
        wait_for_log(first, first_log, "ready")
        running = send_compaction_job(broker, session_id=sessions[0].pk, queue=queue)
        _until(lambda: _job(running).status == Job.Status.RUNNING, "the first job to start", (first, first_log))
        # A second task waits in the queue behind it (the worker prefetches one task per process, acks late).
        waiting = send_compaction_job(broker, session_id=sessions[1].pk, queue=queue)
        assert _job(running).status == Job.Status.RUNNING  # TERM arrives mid-task
        first.send_signal(signal.SIGTERM)  # the main process only, as supervisord does
        _until(lambda: first.poll() is not None, "the worker to exit after its task")
        log = first_log.read_text()

        assert first.returncode == 0, log[-3000:]
        assert "warm shutdown" in log.lower(), log[-3000:]
        done = _job(running)
        assert done.status == Job.Status.SUCCEEDED and done.http_status < 300, (done.result, log[-3000:])
        assert Compaction.objects.filter(session_id=sessions[0].pk).count() == 1
        assert CompactionAttempt.objects.get(session_id=sessions[0].pk).status == "completed"
        assert _job(waiting).status == Job.Status.QUEUED  # never started on the worker that stopped

        second = start_worker(queue=queue, env=env, log=second_log, pool="prefork", concurrency=1)
        _until(lambda: _job(waiting).status not in (Job.Status.QUEUED, Job.Status.RUNNING),
               "the handed-back task to run on the next worker", (second, second_log))
    finally:
        for process in (first, second):
            if process is not None:
                stop(process, sig=signal.SIGKILL)
        forget_queue(client, queue)
        broker.close()

    assert _job(waiting).status == Job.Status.SUCCEEDED, _job(waiting).result
    assert Compaction.objects.filter(session_id=sessions[1].pk).count() == 1
    assert Compaction.objects.filter(session_id__in=[s.pk for s in sessions]).count() == 2  # each once
