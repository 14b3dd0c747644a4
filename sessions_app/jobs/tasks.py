"""The job queue: submitting a job (a manual compaction through `do_request_compaction`) and the Celery task that
runs it (sessions_app.jobs.services does the work)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import IntegrityError, transaction

from compactweb import background
from sessions_app.compactions import queue
from sessions_app.jobs import liveness
from sessions_app.jobs import services as jobs
from sessions_app.models import Job


@shared_task(name="sessions_app.jobs.tasks.run_job", ignore_result=True)
def run_job_task(*, job_id: int) -> str | None:
    """Run one job (a compaction, a replay, an import: sessions_app.jobs); returns its final status.

    Never retried by the queue: a redelivered message finds the job taken and does nothing. It beats while it runs
    (and while a compaction waits for its session), so a job whose process dies ends within the lease TTL
    (sessions_app.jobs.liveness)."""
    with liveness.heartbeat(job_id=job_id):
        job = jobs.run_job(job_id=job_id)
    return None if job is None else job.status


def do_submit_job(*, kind: str, session_id: int | None, actor, params: dict[str, Any], payload: bytes = b"",
                  inline: bool = False) -> Job:
    """Record a queued job and run it: here and now when `inline` (the request is the runner; the job comes back
    finished), else on a worker (with a broker) or the in-process pool once the caller's transaction commits."""
    return _start(_record(kind=kind, session_id=session_id, actor=actor, params=params, payload=payload),
                  inline=inline)


def _record(*, actor, **fields: Any) -> Job:
    return Job.objects.create(actor=actor if getattr(actor, "pk", None) else None, **fields)


def _start(job: Job, *, inline: bool) -> Job:
    jobs.publish_job_event(job, "job.queued")
    if inline:
        with liveness.heartbeat(job_id=job.pk):
            finished = jobs.run_job(job_id=job.pk, inline=True)
        if finished is not None:
            return finished
    transaction.on_commit(lambda: background.submit(run_job_task, job_id=job.pk))
    return job


def do_request_compaction(*, session_id: int, actor, strategy: str | None = None, instructions: str = "",
                          trigger: str = "manual", phase: str | None = None, inline: bool = False) -> Job:
    """A manual compaction ("Compact now", a recovery, the API) as a job: run here when `inline` and the session is
    free, else by a worker, behind the turn holding the session when one does (params `behind` says which).

    Refused (CompactionRequestRefused, nothing changed) when extra instructions come with a method that sends no
    prompt, when the session does not exist, when a compaction holds it, or when another manual compaction of it
    is queued or running: the partial unique index `one_active_compaction_job` decides that race in the database,
    so of many requests at once exactly one becomes a job."""
    strategy = strategy or None
    queue.check_instructions(strategy=strategy, instructions=instructions)
    liveness.expire_unstarted_compactions(session_id=session_id)
    behind = queue.holder_to_queue_behind(session_id=session_id)
    params = {"trigger": trigger, "phase": phase, "strategy": strategy, "instructions": instructions,
              "behind": behind or ""}
    try:
        with transaction.atomic():
            job = _record(kind=Job.Kind.COMPACTION, session_id=session_id, actor=actor, params=params)
    except IntegrityError:
        raise queue.CompactionRequestRefused(queue.ALREADY_ACTIVE_MESSAGE) from None
    return _start(job, inline=inline and behind is None)
