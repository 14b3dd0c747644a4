"""A running job's heartbeat, and the end of a job whose process died.

A worker SIGKILLed mid-job never reaches `_finish`: its job would stay `running` for ever, and a caller polling it
would wait for ever, although the session's lease and the compaction attempt are reaped within the lease TTL. The
process running a job renews `Job.heartbeat_at` every third of the lease TTL (`heartbeat`, a daemon thread beside
the work, which also covers a long provider call); a running job whose heartbeat (or, before the first beat, its
start) is older than one TTL has lost its process, and `reap_dead_jobs` finishes it as failed with the reason
below (`JobLost`: unavailable, code `interrupted`), what a caller would see from a web process that died under its request. It runs
in the scheduler's housekeeping (every 2 s, `sessions_app.fleet.scheduler.housekeeping_done`) and whenever a job
is read through the API, so a dead job ends within the TTL and a few seconds, with or without a scheduler.

A live job that outlasts a reap (its database was unreachable for a whole TTL) still stores its real outcome at
the end: `_finish` overwrites the interrupted answer.

A compaction queued behind a turn stays `queued` while its process waits for that turn, and beats meanwhile; one
that has beaten and then stopped has lost its process too and ends the same way (simulator steps of its session go
on). A queued job that never beat is still waiting for a worker (a broker's queue) and is left alone, except a
compaction that waited longer than a queued compaction may (`expire_unstarted_compactions`): its session may be
compacted again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import close_old_connections
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from compactweb.api_errors import error_answer
from compactweb.domain_errors import Conflict, Unavailable
from sessions_app.compactions import queue
from sessions_app.jobs.services import publish_job_event
from sessions_app.models import Job
from sessions_app.rollout.lease import RENEWALS_PER_TTL, lease_ttl

logger = logging.getLogger(__name__)

JOB_LOST_MESSAGE = "the worker running this job stopped before it finished; submit it again"


class JobLost(Unavailable):
    code = "interrupted"


def beat(*, job_id: int) -> None:
    Job.objects.filter(pk=job_id, status__in=(Job.Status.QUEUED, Job.Status.RUNNING)).update(
        heartbeat_at=timezone.now()
    )


@contextmanager
def heartbeat(*, job_id: int, ttl: timedelta | None = None) -> Iterator[None]:
    """Beat now and every third of the TTL while the block runs (on a thread of its own, with its own
    database connection, so a block busy in a long synchronous call keeps beating)."""
    interval = (lease_ttl() if ttl is None else ttl).total_seconds() / RENEWALS_PER_TTL
    beat(job_id=job_id)
    stop = threading.Event()

    def beat_until_stopped() -> None:
        try:
            while not stop.wait(interval):
                try:
                    beat(job_id=job_id)
                except Exception:  # a database blip: the next beat may pass, within the TTL
                    logger.exception("could not renew the heartbeat of job %s", job_id)
        finally:
            close_old_connections()

    beater = threading.Thread(target=beat_until_stopped, name=f"job-{job_id}-heartbeat", daemon=True)
    beater.start()
    try:
        yield
    finally:
        stop.set()
        beater.join(timeout=interval + 5)


def reap_dead_jobs(*, job_id: int | None = None, now=None, **_signal_kwargs) -> list[int]:
    """Finish as failed every running job, and every queued job that has beaten (or only `job_id`), whose
    heartbeat is older than one lease TTL; returns their ids. A conditional update: a job that beats (or finishes)
    meanwhile is left alone."""
    now = timezone.now() if now is None else now
    dead = Job.objects.annotate(last_beat=Coalesce(F("heartbeat_at"), F("started_at"))).filter(
        Q(status=Job.Status.RUNNING) | Q(status=Job.Status.QUEUED, heartbeat_at__isnull=False),
        last_beat__lt=now - lease_ttl(),
    )
    if job_id is not None:
        dead = dead.filter(pk=job_id)
    status, result = error_answer(JobLost(JOB_LOST_MESSAGE))
    reaped = []
    for job in dead:
        ended = Job.objects.filter(pk=job.pk, status=job.status, heartbeat_at=job.heartbeat_at).update(
            status=Job.Status.FAILED, http_status=status, result=result, finished_at=now
        )
        if ended:
            reaped.append(job.pk)
            job.refresh_from_db()
            publish_job_event(job, "job.finished")
    if reaped:
        logger.warning("ended %d job(s) whose worker died: %s", len(reaped), reaped)
    return reaped + expire_unstarted_compactions(job_id=job_id)


def expire_unstarted_compactions(*, session_id: int | None = None, job_id: int | None = None) -> list[int]:
    """Fail every compaction job (of `session_id`, or `job_id` alone, or all) that was never started by a runner within
    queue.WAIT_SECONDS (a broker without workers, a pool that died with its process): the session is no longer
    held back for it; a runner that takes it later finds it ended. Returns their ids."""
    stale = Job.objects.filter(kind=Job.Kind.COMPACTION, status=Job.Status.QUEUED, heartbeat_at__isnull=True,
                               created_at__lt=queue.fresh_since())
    if session_id is not None:
        stale = stale.filter(session_id=session_id)
    if job_id is not None:
        stale = stale.filter(pk=job_id)
    status, result = error_answer(Conflict("no worker started this compaction in time; ask again"))
    expired = [pk for pk in stale.values_list("pk", flat=True)
               if Job.objects.filter(pk=pk, status=Job.Status.QUEUED, heartbeat_at__isnull=True).update(
                   status=Job.Status.FAILED, http_status=status, result=result, finished_at=timezone.now())]
    for job in Job.objects.filter(pk__in=expired):
        publish_job_event(job, "job.finished")
    return expired
