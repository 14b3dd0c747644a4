"""Celery tasks of the simulator: one step of one simulated session, and the scheduler tick that enqueues due steps.

With a broker (CELERY_BROKER_URL) every step runs on whichever worker takes it; the session's lease keeps two
steps (or a step and a compaction) of one session from overlapping. Without a broker the embedded scheduler calls
the same step function in-process (`sessions_app.fleet.scheduler`).
"""

from __future__ import annotations

import logging
import time

from celery import shared_task

from sessions_app.fleet import runtime as fleet
from sessions_app.models import Session, SimulatorRun

logger = logging.getLogger(__name__)

ENQUEUE_BATCH = 100


@shared_task(name="sessions_app.fleet.tasks.run_simulator_step", ignore_result=True)
def run_simulator_step(session_id: int) -> str:
    """Run the next turn of the session's scenario; returns the step status (ran, finished, busy, skipped, failed).

    Failures are recorded on the run and in the rollout, never raised: a queue retry would run the turn twice."""
    try:
        result = fleet.do_run_step(session_id=session_id)
    except (Session.DoesNotExist, SimulatorRun.DoesNotExist):
        logger.info("no simulator run for session %s", session_id)
        return "skipped"
    return result.status


@shared_task(name="sessions_app.fleet.tasks.simulator_tick", ignore_result=True)
def simulator_tick() -> int:
    """Enqueue every due step (for a periodic scheduler such as celery beat); returns how many."""
    return len(enqueue_due_steps())


class SentClaims:
    """Steps this scheduler sent to the broker and has not seen run, by claim time, so that they can be offered
    again when the broker returns from an outage that may have lost them. A claim older than CLAIM_SECONDS
    lapses by itself and is forgotten."""

    def __init__(self) -> None:
        self._by_time: dict[float, list[int]] = {}

    def add(self, *, claimed_at: float, session_ids: list[int]) -> None:
        if session_ids:
            self._by_time.setdefault(claimed_at, []).extend(session_ids)

    def forget_lapsed(self, *, now: float) -> None:
        for at in [at for at in self._by_time if at + fleet.CLAIM_SECONDS <= now]:
            del self._by_time[at]

    def reoffer(self) -> int:
        """Make every remembered claim that is still outstanding due now; returns how many were."""
        offered = sum(fleet.release_claims(session_ids=ids, now=at) for at, ids in self._by_time.items())
        self._by_time.clear()
        return offered


def enqueue_due_steps(
    *, now: float | None = None, limit: int = ENQUEUE_BATCH, sent_claims: SentClaims | None = None
) -> list[int]:
    """Claim due runs and send one `run_simulator_step` Celery task for each; returns the session ids.

    When sending fails (the broker is down or restarting) the claims not sent are released before the error
    propagates: the runs are due again at the next tick instead of stalling for the claim's lifetime."""
    now = time.time() if now is None else now
    claimed = fleet.claim_due_runs(now=now, limit=limit)
    for sent, session_id in enumerate(claimed):
        try:
            run_simulator_step.apply_async(kwargs={"session_id": session_id})
        except Exception:
            fleet.release_claims(session_ids=claimed[sent:], now=now)
            if sent_claims is not None:
                sent_claims.add(claimed_at=now, session_ids=claimed[:sent])
            raise
    if sent_claims is not None:
        sent_claims.add(claimed_at=now, session_ids=claimed)
    return claimed
