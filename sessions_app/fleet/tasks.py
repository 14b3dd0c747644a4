"""Celery tasks of the simulator: one step of one simulated session, and the scheduler tick that enqueues due steps.

With a broker (CELERY_BROKER_URL) every step runs on whichever worker takes it; the session's lease keeps two
steps (or a step and a compaction) of one session from overlapping. Without a broker the embedded scheduler calls
the same step function in-process (`sessions_app.scheduler`).
"""

from __future__ import annotations

import logging

from celery import shared_task

from sessions_app import fleet, scheduler
from sessions_app.models import Session, SimulatorRun

logger = logging.getLogger(__name__)


@shared_task(name="sessions_app.tasks.run_simulator_step", ignore_result=True)
def run_simulator_step(session_id: int) -> str:
    """Run the next turn of the session's scenario; returns the step status (ran, finished, busy, skipped, failed).

    Failures are recorded on the run and in the rollout, never raised: a queue retry would run the turn twice."""
    try:
        result = fleet.do_run_step(session_id=session_id)
    except (Session.DoesNotExist, SimulatorRun.DoesNotExist):
        logger.info("no simulator run for session %s", session_id)
        return "skipped"
    return result.status


@shared_task(name="sessions_app.tasks.simulator_tick", ignore_result=True)
def simulator_tick() -> int:
    """Enqueue every due step (for a periodic scheduler such as celery beat); returns how many."""
    return len(scheduler.enqueue_due_steps())


@shared_task(name="sessions_app.tasks.run_job", ignore_result=True)
def run_job_task(*, job_id: int) -> str | None:
    """Run one API job (a compaction, a replay, an import: sessions_app.jobs); returns its final status.

    Never retried by the queue: a redelivered message finds the job taken and does nothing."""
    from sessions_app import jobs

    job = jobs.run_job(job_id=job_id)
    return None if job is None else job.status
