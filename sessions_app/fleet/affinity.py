"""Sending each session's steps to the worker that holds its caches, and no step lost when that worker dies
(issue 34; the workers' side is compactweb.worker_affinity).

`StepRouter` picks a session's queue: the queue of the live worker rendezvous hashing picks for it, or None (the
shared queue) when affinity is off or no worker is known to live. It remembers the claims it sent to each worker
(`tasks.SentClaims`). When a worker's heartbeat expires (killed, hung, shut down), the dispatcher's housekeeping
offers that worker's outstanding claims again (`reoffer_dead`): they are due at once and go to a live worker. The
messages still in the dead worker's queue carry their old claim, which no longer stands, so they run nothing if
that worker comes back (`runtime._holds_claim`), and they expire with the claim's lifetime anyway: the step runs
once. A dispatcher that restarted does not know what its predecessor sent; those claims lapse by themselves after
`runtime.CLAIM_SECONDS`, as every claim does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from compactweb import worker_affinity
from sessions_app.fleet.tasks import SentClaims

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0  # how stale the dispatcher's list of live workers may be (one Redis round trip each time)


class StepRouter:
    def __init__(self, *, registry: worker_affinity.Registry | None = None, enabled: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = worker_affinity.enabled() if enabled is None else enabled
        self.registry = registry or worker_affinity.Registry()
        self.clock = clock
        self._live: list[str] = []
        self._read_at = float("-inf")
        self._registry_failing = False
        self._sent: dict[str, SentClaims] = {}

    def live_workers(self, *, fresh: bool = False) -> list[str]:
        """The live workers, read at most every REFRESH_SECONDS (or now when `fresh`). When Redis does not answer,
        none: steps go to the shared queue, which every worker still reads."""
        if not self.enabled:
            return []
        now = self.clock()
        if fresh or now - self._read_at >= REFRESH_SECONDS:
            self._read_at = now
            try:
                self._live = self.registry.live()
                self._registry_failing = False
            except Exception:
                if not self._registry_failing:
                    logger.exception("could not read the live workers: steps go to the shared queue meanwhile")
                self._registry_failing = True
                self._live = []
        return self._live

    def worker_for(self, session_id: int) -> str | None:
        return worker_affinity.rendezvous(session_id, self.live_workers())

    def sent(self, *, worker: str, claimed_at: float, session_ids: list[int]) -> None:
        if session_ids:
            self._sent.setdefault(worker, SentClaims()).add(claimed_at=claimed_at, session_ids=session_ids)

    def reoffer_dead(self, *, now: float) -> int:
        """Offer again the outstanding claims sent to workers that are no longer live; returns how many were."""
        if not self._sent:
            return 0
        live = set(self.live_workers(fresh=True))
        if self._registry_failing:  # unknown is not dead: a Redis hiccup must not re-offer every step
            return 0
        offered = 0
        for worker in [w for w in self._sent if w not in live]:
            count = self._sent.pop(worker).reoffer()
            offered += count
            logger.warning("worker %s stopped beating: offered its %d outstanding step(s) again", worker, count)
        for claims in self._sent.values():
            claims.forget_lapsed(now=now)
        return offered
