"""Celery tasks of the simulator: one step of one simulated session, and the scheduler tick that enqueues due steps.

With a broker (CELERY_BROKER_URL) a session's steps go to the queue of the live worker that holds its caches
(`sessions_app.fleet.affinity`), or, with affinity off or no worker known, to the shared queue that any worker
takes from; the session's lease keeps two steps (or a step and a compaction) of one session from overlapping, and
the claim a step carries keeps one claim from running twice. Without a broker the embedded scheduler calls
the same step function in-process (`sessions_app.fleet.scheduler`).
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.signals import worker_init

from compaction_app.engine import tokens
from compaction_app.engine.settings import CompactionSettings
from compactweb import worker_affinity
from sessions_app.fleet import runtime as fleet
from sessions_app.models import Session, SimulatorRun

logger = logging.getLogger(__name__)

ENQUEUE_BATCH = 100


@worker_init.connect(weak=False, dispatch_uid="compactweb-warm-token-counter")
def warm_token_counter(**signal_kwargs) -> None:
    """Build the default token counter in the worker's main process, before the pool forks its children.

    Otherwise each child decodes the tokenizer's rank file at its first step: a profile of four workers found that
    one-time load to be most of what a turn's CPU gained over one worker (docs/benchmarks.md, worker affinity)."""
    tokens.counter(CompactionSettings.token_counter)


@shared_task(name="sessions_app.fleet.tasks.run_simulator_step", ignore_result=True)
def run_simulator_step(session_id: int, claimed_at: float | None = None) -> str:
    """Run the next turn of the session's scenario; returns the step status (ran, finished, busy, skipped, failed).
    `claimed_at`: the claim it was sent for; when the run no longer holds it the step runs nothing ("skipped").

    Failures are recorded on the run and in the rollout, never raised: a queue retry would run the turn twice."""
    try:
        result = fleet.do_run_step(session_id=session_id, claimed_at=claimed_at)
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
    *, now: float | None = None, limit: int = ENQUEUE_BATCH, sent_claims: SentClaims | None = None, router=None
) -> list[int]:
    """Claim due runs and send one `run_simulator_step` Celery task for each; returns the session ids. With a
    `router` (`affinity.StepRouter`) each goes to its session's worker, else to the shared queue. Each carries its
    claim, and expires when the claim lapses (a claim that lapsed is handed out again).

    When sending fails (the broker is down or restarting) the claims not sent are released before the error
    propagates: the runs are due again at the next tick instead of stalling for the claim's lifetime."""
    now = time.time() if now is None else now
    claimed = fleet.claim_due_runs(now=now, limit=limit)
    routed: dict[str, list[int]] = {}
    for sent, session_id in enumerate(claimed):
        worker = router.worker_for(session_id) if router is not None else None
        queue = {} if worker is None else {"queue": worker_affinity.queue_of(worker)}
        try:
            run_simulator_step.apply_async(kwargs={"session_id": session_id, "claimed_at": now},
                                           expires=fleet.claim_lapses_at(now), **queue)
        except Exception:
            fleet.release_claims(session_ids=claimed[sent:], now=now)
            if sent_claims is not None:
                sent_claims.add(claimed_at=now, session_ids=claimed[:sent])
            _remember_routes(router, routed, now)
            raise
        if worker is not None:
            routed.setdefault(worker, []).append(session_id)
    if sent_claims is not None:
        sent_claims.add(claimed_at=now, session_ids=claimed)
    _remember_routes(router, routed, now)
    return claimed


def _remember_routes(router, routed: dict[str, list[int]], claimed_at: float) -> None:
    for worker, session_ids in routed.items():
        router.sent(worker=worker, claimed_at=claimed_at, session_ids=session_ids)
