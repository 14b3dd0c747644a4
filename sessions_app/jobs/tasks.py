"""The job queue: submitting an API job (or queueing a compaction behind a turn) and the Celery task that runs it
(sessions_app.jobs.services does the work)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import transaction

from compactweb import background
from sessions_app.compactions import queue
from sessions_app.jobs import liveness
from sessions_app.jobs import services as jobs
from sessions_app.models import Job


@shared_task(name="sessions_app.jobs.tasks.run_job", ignore_result=True)
def run_job_task(*, job_id: int) -> str | None:
    """Run one API job (a compaction, a replay, an import: sessions_app.jobs); returns its final status.

    Never retried by the queue: a redelivered message finds the job taken and does nothing. It beats while it runs,
    so a job whose process dies ends within the lease TTL (sessions_app.jobs.liveness)."""
    with liveness.heartbeat(job_id=job_id):
        job = jobs.run_job(job_id=job_id)
    return None if job is None else job.status


def do_submit_job(*, kind: str, session_id: int | None, actor, params: dict[str, Any], payload: bytes = b"") -> Job:
    """Record a queued job and hand it to a worker (with a broker) or the in-process pool."""
    job = Job.objects.create(kind=kind, session_id=session_id, actor=actor if getattr(actor, "pk", None) else None,
                             params=params, payload=payload)
    jobs.publish_job_event(job, "job.queued")
    transaction.on_commit(lambda: background.submit(run_job_task, job_id=job.pk))
    return job


def do_queue_compaction_job(*, session_id: int, actor, params: dict[str, Any]) -> Job | None:
    """An API compaction asked for while a turn (a simulator step, an API turn, a rollback) holds the session:
    queued behind that turn like the UI's (sessions_app.compactions.queue, so simulator steps wait for it), as a
    job that stays `queued` until the turn ends, then runs (`running`) and finishes with the API's answer.

    None when nothing holds the session (the caller compacts as usual). Raises CompactionRequestRefused when the
    session does not exist, or when another compaction runs or waits already; nothing changed then."""
    behind = queue.holder_to_queue_behind(session_id=session_id)
    if behind is None:
        return None
    queued = queue.queue_behind(session_id=session_id, actor=actor, behind=behind, strategy=params.get("strategy"),
                                instructions=params.get("instructions") or "")
    return do_submit_job(kind=Job.Kind.COMPACTION, session_id=session_id, actor=actor,
                         params={**params, jobs.QUEUED_PARAM: queued.pk})
