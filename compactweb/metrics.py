"""compactweb's Prometheus metrics (issue 45): every metric family is defined here, once, and nowhere else.

Two kinds, chosen by where the truth lives (docs/operations.md, "Metrics"):

- **Events** (a gateway request, a compaction attempt, a turn, a simulator step) are counted by the process they
  happen in, with prometheus-client's counters and histograms. With `PROMETHEUS_MULTIPROC_DIR` set (scripts/
  scale-out sets it for every process of a set: Daphne, the Celery workers and their prefork children, the
  scheduler) each process writes its values to its own files there and any web process's `/metrics` adds them up;
  without it (the embedded default, one process) they live in this process's registry.
- **State** (alerts open, jobs waiting, workers and scheduler alive, the database and broker health) is read at
  scrape time from the database, Redis and the heartbeat file by the sources the apps register
  (`add_state_source`): the same answer whichever process is scraped, and nothing stale left by a process that
  died.

Names follow Prometheus' conventions (`compactweb_` prefix, base units, `_total` counters) and every label takes
values from a bounded set (route names an admin configures, statuses, vocabulary values), never a session id.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    multiprocess,
)
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
NO_ROUTE = "none"  # a request refused before its route was known (no key, an unknown path)
OTHER = "other"

# Seconds: from a cached answer (milliseconds) to a long streamed turn (minutes).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TOKEN_BUCKETS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000)
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)

# --- the gateway ------------------------------------------------------------------------------------------------

GATEWAY_REQUESTS = Counter(
    "compactweb_gateway_requests_total", "Requests the gateway answered, by route, endpoint, compaction mode and "
    "the HTTP status the client got.", ["route", "endpoint", "mode", "status"])
GATEWAY_FIRST_BYTE = Histogram(
    "compactweb_gateway_time_to_first_byte_seconds", "From the request's arrival to the first byte of the answer's "
    "body sent to the client.", ["route", "endpoint"], buckets=LATENCY_BUCKETS)
GATEWAY_DURATION = Histogram(
    "compactweb_gateway_request_duration_seconds", "From the request's arrival to the answer's last byte (or the "
    "client's hang-up).", ["route", "endpoint"], buckets=LATENCY_BUCKETS)
GATEWAY_UPSTREAM_ERRORS = Counter(
    "compactweb_gateway_upstream_errors_total", "Upstream failures: unreachable (the gateway answered 502), "
    "upstream_status (a status of 500 or more passed on), stream_failed (a stream that ended with "
    "response.failed).", ["route", "reason"])
GATEWAY_HANGUPS = Counter(
    "compactweb_gateway_client_hangups_total", "Requests whose client went away before the answer ended.",
    ["route", "endpoint"])
RECORDER_DEPTH = Gauge(
    "compactweb_gateway_recorder_queue_depth", "Exchanges waiting for the gateway's recorder thread (summed over "
    "the live web processes).", multiprocess_mode="livesum")
RECORDER_OLDEST = Gauge(
    "compactweb_gateway_recorder_oldest_age_seconds", "Age of the oldest exchange waiting for a recorder, as of "
    "that process's last submit or write (the largest over the live web processes).", multiprocess_mode="livemax")
RECORDER_WAIT = Histogram(
    "compactweb_gateway_recorder_wait_seconds", "How long an exchange waited for the recorder before its batch was "
    "written.", buckets=LATENCY_BUCKETS)

# --- compactions (compaction_app.records, the one writer of their rows) -----------------------------------------

COMPACTION_ATTEMPTS = Counter(
    "compactweb_compaction_attempts_total", "Compaction attempts that ended, by method (strategy), trigger and "
    "outcome (completed, failed, interrupted).", ["method", "trigger", "outcome"])
COMPACTION_DURATION = Histogram(
    "compactweb_compaction_duration_seconds", "Duration of the compaction attempts that ended with one.", ["method"],
    buckets=LATENCY_BUCKETS)
COMPACTION_TOKENS_BEFORE = Histogram(
    "compactweb_compaction_tokens_before", "Window tokens before each installed compaction.", ["method"],
    buckets=TOKEN_BUCKETS)
COMPACTION_TOKENS_AFTER = Histogram(
    "compactweb_compaction_tokens_after", "Window tokens after each installed compaction.", ["method"],
    buckets=TOKEN_BUCKETS)
COMPACTION_FREED = Counter(
    "compactweb_compaction_freed_tokens_total", "Window tokens the installed compactions freed.", ["method"])
COMPACTION_RETENTION = Histogram(
    "compactweb_compaction_retention_score", "Retention score (kept / total facts, 0..1) of each scored "
    "compaction.", ["method"], buckets=SCORE_BUCKETS)
COMPACTION_CALL_TOKENS = Counter(
    "compactweb_compaction_call_tokens_total", "Tokens the compactions' model calls spent.", ["method"])
COMPACTION_PROBE_TOKENS = Counter(
    "compactweb_compaction_probe_tokens_total", "Tokens the retention probes spent.", ["method"])

# --- turns and the simulator ------------------------------------------------------------------------------------

TURNS = Counter("compactweb_turns_total", "Turns, by outcome (completed, failed; error: raised before or instead "
                "of an outcome, e.g. the session busy or bad input).", ["outcome"])
STEPS = Counter("compactweb_simulator_steps_total", "Simulator steps, by outcome (ran, finished, busy, skipped, "
                "failed, interrupted; error: raised).", ["outcome"])

RAISED = "error"


def counted(counter: Counter, outcome: Callable[[Any], str]):
    """Decorate an async function: each call counts once on `counter`, labelled `outcome(result)` (RAISED when it
    raised)."""

    def decorate(fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                result = await fn(*args, **kwargs)
            except BaseException:
                counter.labels(RAISED).inc()
                raise
            counter.labels(outcome(result)).inc()
            return result

        return wrapper

    return decorate


# --- state, read at scrape time (the apps' sources build these names) -------------------------------------------

ALERTS_OPEN = "compactweb_alerts_open"
ALERTS_RAISED = "compactweb_alerts_raised"  # a counter: exposed with _total
JOBS = "compactweb_jobs"
JOB_OLDEST_QUEUED = "compactweb_job_oldest_queued_age_seconds"
WORKERS_ALIVE = "compactweb_workers_alive"
SCHEDULER_HEARTBEAT_AGE = "compactweb_scheduler_heartbeat_age_seconds"
DEPENDENCY_UP = "compactweb_dependency_up"

# --- observing ----------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _gateway_series(route: str, endpoint: str, mode: str, status: int):
    """The request's labelled children, looked up once per label set (`labels()` validates and locks each time)."""
    return (GATEWAY_REQUESTS.labels(route, endpoint, mode, str(status)), GATEWAY_FIRST_BYTE.labels(route, endpoint),
            GATEWAY_DURATION.labels(route, endpoint))


def gateway_request(*, route: str, endpoint: str, mode: str, status: int, first_byte: float | None,
                    total: float, hung_up: bool, upstream_error: str = "") -> None:
    """One gateway request ended (compactweb.gateway_metrics sees its whole answer go out)."""
    route = route or NO_ROUTE
    requests, first_bytes, durations = _gateway_series(route, endpoint, mode or NO_ROUTE, status)
    requests.inc()
    if first_byte is not None:
        first_bytes.observe(first_byte)
    durations.observe(total)
    if hung_up:
        GATEWAY_HANGUPS.labels(route, endpoint).inc()
    if upstream_error:
        GATEWAY_UPSTREAM_ERRORS.labels(route, upstream_error).inc()


class RecorderWait:
    """When each exchange still waiting for this process's recorder was handed over: the queue's depth and age."""

    def __init__(self) -> None:
        self._since: deque[float] = deque()
        self._lock = threading.Lock()

    def submitted(self) -> None:
        with self._lock:
            self._since.append(time.monotonic())
            self._publish()

    def written(self, count: int) -> None:
        now = time.monotonic()
        with self._lock:
            for _ in range(min(count, len(self._since))):
                RECORDER_WAIT.observe(now - self._since.popleft())
            self._publish()

    def _publish(self) -> None:
        RECORDER_DEPTH.set(len(self._since))
        RECORDER_OLDEST.set(time.monotonic() - self._since[0] if self._since else 0.0)


recorder_wait = RecorderWait()


def attempts_ended(rows: Iterable[tuple[str, str, str, int | None]]) -> None:
    """Compaction attempts that ended: (method, trigger, outcome, duration in ms or None) each."""
    for method, trigger, outcome, duration_ms in rows:
        COMPACTION_ATTEMPTS.labels(method, trigger, outcome).inc()
        if duration_ms is not None:
            COMPACTION_DURATION.labels(method).observe(duration_ms / 1000)


def compaction_installed(*, method: str, tokens_before: int, tokens_after: int, call_tokens: int,
                         probe_tokens: int, retention_score: float | None) -> None:
    COMPACTION_TOKENS_BEFORE.labels(method).observe(tokens_before)
    COMPACTION_TOKENS_AFTER.labels(method).observe(tokens_after)
    COMPACTION_FREED.labels(method).inc(max(tokens_before - tokens_after, 0))
    COMPACTION_CALL_TOKENS.labels(method).inc(call_tokens)
    COMPACTION_PROBE_TOKENS.labels(method).inc(probe_tokens)
    if retention_score is not None:
        COMPACTION_RETENTION.labels(method).observe(retention_score)


def compaction_scored(*, method: str, retention_score: float | None) -> None:
    """A compaction scored after the fact (an imported or followed rollout's)."""
    if retention_score is not None:
        COMPACTION_RETENTION.labels(method).observe(retention_score)


# --- state sources and the scrape ---------------------------------------------------------------------------------

StateSource = Callable[[], Iterable[Metric]]
_sources: dict[str, StateSource] = {}


def add_state_source(name: str, source: StateSource) -> None:
    """Register a reader of shared state, run at each scrape (an app's ready(); registering again replaces)."""
    _sources[name] = source


class _StateCollector(Collector):
    def collect(self) -> Iterable[Metric]:
        for source in list(_sources.values()):
            yield from source()


def multiprocess_dir() -> str:
    return os.environ.get(MULTIPROC_ENV, "")


def scrape(accept: str = "") -> tuple[bytes, str]:
    """The exposition of every family (in the format the scraper's Accept header asks for: Prometheus' text or
    OpenMetrics) and its content type: this process's (or, in multiprocess mode, every process's) events and the
    state the sources read now."""
    directory = multiprocess_dir()
    if directory:
        _forget_dead_processes(directory)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)
    else:
        registry = CollectorRegistry()
        registry.register(_Events())
    registry.register(_StateCollector())
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _forget_dead_processes(directory: str) -> None:
    """Drop the live gauges of processes that are gone (a restarted Daphne, a replaced prefork child): their
    counters stay (what they counted happened), their queue depths must not. The processes of a set share this
    machine (one directory per machine), so a pid that no longer exists is a process that died."""
    pids = set()
    for name in os.listdir(directory):
        if name.startswith("gauge_live") and name.endswith(".db"):
            pid = name.rsplit("_", 1)[-1][:-3]
            if pid.isdigit():
                pids.add(int(pid))
    for pid in pids:
        if not _alive(pid):
            multiprocess.mark_process_dead(pid, path=directory)


class _Events(Collector):
    """The process's own registry (the embedded default), without re-registering its collectors elsewhere."""

    def collect(self) -> Iterable[Metric]:
        yield from REGISTRY.collect()
