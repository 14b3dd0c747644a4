"""Who runs simulator steps: an asyncio scheduler that claims due runs and either runs their steps in this process
(the embedded default) or sends each as a Celery task (`sessions_app.fleet.tasks.run_simulator_step`) when a broker is
configured, so several workers share the fleet.

Embedded: the dashboard process runs the scheduler in a background thread when `COMPACTWEB_RUN_SIMULATOR=1`
(`scripts/dev` sets it; Daphne has no lifespan hook, so the ASGI module `compactweb.asgi` calls `start_from_environment`
at startup, never `AppConfig.ready`, which also runs under migrate, shell and workers).
A few steps run at once, each on a different session. With a broker: the same loop only enqueues; run it in the
dashboard (same variable) or on its own with `manage.py simulate --scheduler`. Claims are conditional updates, so
two schedulers never hand out the same step.

Between ticks the scheduler also keeps house (every HOUSEKEEPING_SECONDS): it frees expired session leases and
finishes their dead holders' compaction attempts as interrupted (`locks.reap_expired`), tells the rooms above
(`housekeeping_done`: API jobs whose worker died end as interrupted), and, with a broker, it
watches the broker: when the broker comes back after an outage, the steps it sent that have not run yet are offered
again at once (they may have been lost with the broker) instead of waiting out their claim (fleet.CLAIM_SECONDS).
With a broker it also sends each session's steps to the worker that holds its caches (`affinity.StepRouter`), and
offers again the steps it sent to a worker whose heartbeat expired, so a dead worker's queue loses no step.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.dispatch import Signal

from compactweb import background, db_outage, health, set_start
from sessions_app.fleet import runtime as fleet
from sessions_app.fleet.affinity import StepRouter
from sessions_app.fleet.tasks import ENQUEUE_BATCH, SentClaims, enqueue_due_steps
from sessions_app.rollout import lease as locks
from sessions_app.rollout.events import publish_transient

logger = logging.getLogger(__name__)

ENV_FLAG = "COMPACTWEB_RUN_SIMULATOR"
DEFAULT_CONCURRENCY = 4
DEFAULT_POLL_SECONDS = 0.5
HOUSEKEEPING_SECONDS = 2.0
LEASE_REAPED = "lease.reaped"
# Sent after each housekeeping round (a synchronous receiver, on a worker thread): the rooms above the fleet
# finish what a dead process left behind, e.g. sessions_app.jobs.liveness.reap_dead_jobs (wired in apps.py).
housekeeping_done = Signal()


def reap_expired_leases() -> list[int]:
    """Free expired leases (their holders died), make those sessions' simulator steps due again, and tell the
    pages, whose compaction status box then shows the attempt interrupted instead of running."""
    reaped = locks.reap_expired()
    fleet.release_claims_of_dead_holders(session_ids=reaped)
    for session_id in reaped:
        try:
            publish_transient(session_id=session_id, after_seq=0, kind=LEASE_REAPED, detail={})
        except Exception:  # the page re-syncs on its next reconnect
            logger.exception("could not publish the reaped lease of session %s", session_id)
    if reaped:
        logger.info("freed the expired lease of %d session(s): %s", len(reaped), reaped)
    return reaped


class Scheduler:
    """Claims due runs and dispatches their steps; `inline` runs them on this event loop, else Celery tasks."""

    def __init__(
        self,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        inline: bool | None = None,
        clock: Callable[[], float] = time.time,
        step: Callable | None = None,
        heartbeat_path: str | os.PathLike | None = None,
        router: StepRouter | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.poll_seconds = poll_seconds
        self.inline = (not background.uses_broker()) if inline is None else inline
        self.clock = clock
        self.step = step or fleet.arun_step
        self.steps_started = 0
        self.results: list[fleet.StepResult] = []
        self._tasks: set[asyncio.Task] = set()
        self._wake: asyncio.Event | None = None
        self.sent_claims = SentClaims()
        self.broker_down = False
        self.database_down = False
        self._housekept_at = float("-inf")
        self.heartbeat_path = heartbeat_path
        self._announced = False
        self.router = None if self.inline else (router or StepRouter())

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def _wake_event(self) -> asyncio.Event:
        if self._wake is None:
            self._wake = asyncio.Event()
        return self._wake

    async def tick(self, *, limit: int | None = None) -> int:
        """Dispatch the steps that are due now (up to the free concurrency and `limit`); returns how many."""
        if not self.inline:
            try:
                sent = await sync_to_async(enqueue_due_steps)(
                    now=self.clock(), limit=limit or ENQUEUE_BATCH, sent_claims=self.sent_claims, router=self.router
                )
            except Exception as exc:
                if not (db_outage.is_unavailable(exc) or db_outage.is_conflict(exc)):  # the broker, then
                    self.broker_down = True
                raise
            await self._broker_answered()
            self.steps_started += len(sent)
            return len(sent)
        free = self.concurrency - len(self._tasks)
        if limit is not None:
            free = min(free, limit)
        if free <= 0:
            return 0
        claimed = await sync_to_async(fleet.claim_due_runs)(now=self.clock(), limit=free)
        for session_id in claimed:
            task = asyncio.create_task(self._run(session_id))
            self._tasks.add(task)
            self.steps_started += 1
        return len(claimed)

    async def _broker_answered(self) -> None:
        if self.broker_down:
            self.broker_down = False
            offered = await sync_to_async(self.sent_claims.reoffer)()
            logger.info("the broker is back: offered %d unsent or lost step(s) again", offered)

    async def housekeeping(self) -> None:
        """Reap expired leases; with a broker, notice an outage and re-offer the steps it may have lost, and those
        sent to a worker that stopped beating."""
        now = self.clock()
        if now - self._housekept_at < HOUSEKEEPING_SECONDS:
            return
        self._housekept_at = now
        await sync_to_async(reap_expired_leases)()
        await sync_to_async(self._send_housekeeping_done)()
        if self.inline:
            return
        self.sent_claims.forget_lapsed(now=now)
        try:
            await sync_to_async(health.check_broker, thread_sensitive=False)()
        except Exception:
            if not self.broker_down:
                logger.warning("the broker does not answer; steps sent before the outage will be offered again")
            self.broker_down = True
            return
        await self._broker_answered()
        await sync_to_async(self.router.reoffer_dead)(now=now)

    def _send_housekeeping_done(self) -> None:
        housekeeping_done.send_robust(sender=Scheduler)  # a failing receiver is logged and the others still run

    async def _run(self, session_id: int) -> None:
        try:
            self.results.append(await self.step(session_id=session_id))
        except Exception:  # a step records its own failures; this only guards the loop
            logger.exception("simulator step for session %s crashed", session_id)
        finally:
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._wake_event().set()

    async def _idle_wait(self) -> None:
        wake = self._wake_event()
        try:
            await asyncio.wait_for(wake.wait(), timeout=self.poll_seconds)
        except TimeoutError:
            pass
        wake.clear()

    def beat(self) -> None:
        """Touch the heartbeat file (when there is one): after each round of the loop that reached the database,
        on the loop itself, so a scheduler whose loop hangs (a query that never returns, a blocked event loop) or
        that cannot reach the database stops beating and the watchdog (compactweb.watchdog.scheduler_alive)
        restarts it. A loop that turns but fails every round is no progress."""
        if self.heartbeat_path is None:
            return
        try:
            with open(self.heartbeat_path, "a"):
                os.utime(self.heartbeat_path)
            if not self._announced:
                # In a scale-out set: this set's scheduler is up (a previous set's may beat the same file).
                set_start.announce_ready("scheduler")
                self._announced = True
        except OSError:
            logger.exception("could not write the scheduler's heartbeat")

    async def run(self, stop: threading.Event | asyncio.Event) -> None:
        """Tick until `stop` is set; waits `poll_seconds` (or until a step ends) when nothing was due. Beats once
        a round (`beat`)."""
        while not stop.is_set():
            failures = []
            try:
                # A connection a database restart broke fails every statement until closed: close it, so the
                # round after the database returns reconnects.
                await sync_to_async(db_outage.drop_broken_connections)()
                await self.housekeeping()
            except Exception as exc:
                failures.append(("scheduler housekeeping failed", exc))
            try:
                dispatched = await self.tick()
            except Exception as exc:
                failures.append(("simulator tick failed", exc))
                dispatched = 0
            await self._after_round(failures)
            if not dispatched:
                await self._idle_wait()
        await self.drain()

    async def _after_round(self, failures: list[tuple[str, Exception]]) -> None:
        """Beat when the round reached the database; log an outage once when it starts and once when it ends (not
        every round), and when it ends offer again the steps sent before it (a worker may have dropped them)."""
        database_failed = any(db_outage.is_unavailable(exc) for _, exc in failures)
        for message, exc in failures:
            if not (database_failed and self.database_down):
                logger.error(message, exc_info=exc)
        if database_failed:
            if not self.database_down:
                logger.warning("the database does not answer; the scheduler retries every round")
            self.database_down = True
            return
        self.beat()
        if self.database_down:
            self.database_down = False
            offered = await sync_to_async(self.sent_claims.reoffer)()
            logger.info("the database is back: offered %d step(s) sent before the outage again", offered)

    async def drain(self) -> None:
        """Wait for the steps in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def run_until_idle(self, *, timeout: float | None = None, max_steps: int | None = None) -> int:
        """Run steps until no run is running (a non-looping fleet finished), `max_steps` steps were started, or
        `timeout` seconds passed; returns the number of steps started."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if max_steps is not None and self.steps_started >= max_steps:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            remaining = None if max_steps is None else max_steps - self.steps_started
            dispatched = await self.tick(limit=remaining)
            if not dispatched:
                if not self._tasks and not await sync_to_async(fleet.active_runs)():
                    break
                await self._idle_wait()
        await self.drain()
        return self.steps_started


SHUTDOWN_SECONDS = 10.0  # how long a stopping dashboard waits for the simulator's steps in flight


class SchedulerThread(threading.Thread):
    """The scheduler on its own event loop in a daemon thread (the embedded dashboard's simulator)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(name="compactweb-simulator", daemon=True)
        self.scheduler_kwargs = kwargs
        self.stop_event = threading.Event()

    def run(self) -> None:
        close_old_connections()
        try:
            asyncio.run(Scheduler(**self.scheduler_kwargs).run(self.stop_event))
        finally:
            close_old_connections()

    def stop(self, timeout: float | None = 10.0) -> None:
        self.stop_event.set()
        self.join(timeout)


def _stop_at_exit(thread: SchedulerThread) -> None:
    """Ctrl-C / TERM: stop the scheduler (its step in flight finishes) before the interpreter shuts the thread
    pools down, so a stopped dashboard prints no traceback from a half-run step and fails no run. Threading's
    exit hooks run before those pools close (and in reverse order, so this one first); plain atexit runs too late.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - every CPython since 3.9 has it
        atexit.register(thread.stop, SHUTDOWN_SECONDS)
        return
    register(thread.stop, SHUTDOWN_SECONDS)


_started: SchedulerThread | None = None
_start_lock = threading.Lock()


def start_from_environment(environ: dict | None = None) -> SchedulerThread | None:
    """Start the background scheduler once per process when COMPACTWEB_RUN_SIMULATOR=1 (scripts/dev sets it)."""
    global _started
    environ = os.environ if environ is None else environ
    if environ.get(ENV_FLAG) != "1":
        return None
    with _start_lock:
        if _started is None:
            _started = SchedulerThread(
                concurrency=int(environ.get("COMPACTWEB_SIMULATOR_CONCURRENCY", DEFAULT_CONCURRENCY))
            )
            _started.start()
            _stop_at_exit(_started)
            logger.info("simulator scheduler started (%s)", "in-process" if not background.uses_broker() else "Celery")
        return _started
