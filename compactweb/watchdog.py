"""Liveness checks wired to restarts, for the processes supervisord runs (scripts/scale-out).

supervisord restarts a process that exits; this restarts one that is still there but no longer works: a web
process that stops answering HTTP, a worker that stops answering pings, a scheduler that stops beating (its loop
touches a heartbeat file every round, `manage.py simulate --scheduler --heartbeat-file`; a hung query or a
blocked event loop or a database it cannot reach stops it). It checks liveness: a web process answering 503
because Redis is down is alive (restarting it would not bring Redis back), and workers are not judged while the
broker itself does not answer. A process is restarted after FAILURES_BEFORE_RESTART checks in a row fail, and
not judged during its first GRACE_SECONDS (start-up: migrations, imports), nor until it is ready (it answered
once) or its readiness window passed; restarts in a row back off (`Watchdog`), and probe timeouts stretch with
the host's load, so a saturated host is not a reason to restart everything on it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import urllib.error
import urllib.request
import xmlrpc.client
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from supervisor.xmlrpc import SupervisorTransport

from compactweb.celery import app
from compactweb.health import check_broker

logger = logging.getLogger(__name__)

FAILURES_BEFORE_RESTART = 3
GRACE_SECONDS = 20.0
INTERVAL_SECONDS = 5.0
HTTP_TIMEOUT = 5.0
# A scheduler's round is well under a second when healthy (a tick, housekeeping every 2 s, a 0.5 s idle wait);
# a heartbeat this old means its loop no longer turns.
HEARTBEAT_MAX_AGE = 30.0
# Back-off: a program restarted n times in a row gets BACKOFF_BASE_SECONDS * 2**(n-1) (at most BACKOFF_MAX_SECONDS)
# to become ready, and is not restarted again sooner; answering HEALTHY_RESET_SECONDS in a row forgets its restarts.
BACKOFF_BASE_SECONDS = 30.0
BACKOFF_MAX_SECONDS = 600.0
HEALTHY_RESET_SECONDS = 120.0
WORKER_PING_SECONDS = 3.0
MAX_LOAD_STRETCH = 4.0  # a probe's timeout grows with the host's load up to this many times its base
RUNNING = "RUNNING"
UNKNOWN = None  # a probe that cannot judge now (the broker is down): neither a pass nor a failure


def web_alive(host: str, port: int, *, timeout: float | None = None) -> bool:
    """True when the web process answers /healthz at all (200 or 503: a dependency down is not its death), within
    a timeout stretched by the host's load (`probe_timeout`)."""
    if timeout is None:
        timeout = probe_timeout(HTTP_TIMEOUT, load=load_per_core())
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, urllib.error.URLError):
        return False


def worker_alive(node: str, *, timeout: float | None = None) -> bool | None:
    """True when the named Celery worker answers a ping (within a timeout stretched by the host's load, see
    `probe_timeout`); None (cannot judge) when the broker does not answer."""
    try:
        check_broker()
    except Exception:
        return UNKNOWN
    if timeout is None:
        timeout = probe_timeout(WORKER_PING_SECONDS, load=load_per_core())
    replies = app.control.ping(destination=[node], timeout=timeout) or []
    return any(node in reply for reply in replies)


def scheduler_alive(heartbeat_path: str, *, max_age: float = HEARTBEAT_MAX_AGE,
                    clock: Callable[[], float] = time.time) -> bool:
    """True when the scheduler touched its heartbeat file within `max_age` seconds (a missing file: not alive;
    the watchdog's grace period covers a scheduler that has just started)."""
    try:
        return clock() - os.stat(heartbeat_path).st_mtime <= max_age
    except OSError:
        return False


def celery_node(program: str) -> str:
    """The node name scripts/scale-out gives the worker it runs as `program` (celery's `-n program@%h`)."""
    return f"{program}@{socket.gethostname()}"


@dataclass
class ProgramState:
    """What the watchdog remembers of one program: the process it judges (by supervisord's start time), whether
    that process has answered once (it is ready), failures in a row, and its restarts in a row."""

    started: float | None = None
    ready: bool = False
    alive_since: float | None = None  # since when it has answered every probe
    failures: int = 0
    restarts_in_a_row: int = 0  # restarts with no HEALTHY_RESET_SECONDS of answering in between
    last_restart: float = float("-inf")


def backoff_seconds(restarts_in_a_row: int, *, base: float = BACKOFF_BASE_SECONDS,
                    cap: float = BACKOFF_MAX_SECONDS) -> float:
    """How long a program restarted `restarts_in_a_row` times in a row gets: to become ready after its start, and
    before the watchdog restarts it again (base, 2 base, 4 base, ... up to cap)."""
    return min(cap, base * 2 ** max(0, restarts_in_a_row))


def load_per_core() -> float:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # pragma: no cover - no load average on this platform
        return 0.0


def probe_timeout(base: float, *, load: float) -> float:
    """A probe's timeout on a host with `load` runnable processes per core: a saturated host answers slowly, and a
    slow answer is not a dead process (up to MAX_LOAD_STRETCH times `base`)."""
    return base * min(MAX_LOAD_STRETCH, max(1.0, load))


@dataclass
class Watchdog:
    """Restart supervisord programs whose probe fails FAILURES_BEFORE_RESTART times in a row, with back-off.

    `supervisor` is supervisord's XML-RPC namespace (`proxy.supervisor`): getProcessInfo, stopProcess,
    startProcess. `probes` maps a program name to a callable answering True (alive), False, or None (unknown).

    A process is judged only once it is ready (it answered a probe since it started), or once it had its
    readiness window (`backoff_seconds` of its restarts in a row; at least the grace period) without ever
    answering: on a saturated host a restarted worker can take minutes to start, and judging it during its start
    restarted it again and again, none ever ready. A program restarted again soon after a restart waits out its
    back-off first; `HEALTHY_RESET_SECONDS` of answering forgets its restarts."""

    supervisor: Any
    probes: dict[str, Callable[[], bool | None]]
    failures_before_restart: int = FAILURES_BEFORE_RESTART
    grace_seconds: float = GRACE_SECONDS
    backoff_base: float = BACKOFF_BASE_SECONDS
    backoff_max: float = BACKOFF_MAX_SECONDS
    healthy_reset: float = HEALTHY_RESET_SECONDS
    clock: Callable[[], float] = time.time
    states: dict[str, ProgramState] = field(default_factory=dict)
    restarts: list[str] = field(default_factory=list)

    @property
    def failures(self) -> dict[str, int]:
        return {name: state.failures for name, state in self.states.items()}

    def _backoff(self, restarts_in_a_row: int) -> float:
        return backoff_seconds(restarts_in_a_row, base=self.backoff_base, cap=self.backoff_max)

    def check_once(self) -> list[str]:
        """Probe every program once; returns the programs restarted."""
        restarted = []
        for name, probe in self.probes.items():
            if self._check(name, probe):
                restarted.append(name)
        return restarted

    def _check(self, name: str, probe: Callable[[], bool | None]) -> bool:
        info = self.supervisor.getProcessInfo(name)
        state = self.states.setdefault(name, ProgramState())
        if info["start"] != state.started:  # another process of the program: judge it from its start
            state.started, state.ready, state.alive_since, state.failures = info["start"], False, None, 0
        now = self.clock()
        age = now - info["start"]
        if info["statename"] != RUNNING or age < self.grace_seconds:
            state.failures = 0
            return False
        alive = probe()
        if alive is UNKNOWN:
            return False
        if alive:
            state.failures = 0
            if not state.ready:
                logger.info("%s is ready (%.0f s after its start)", name, age)
            state.ready = True
            state.alive_since = now if state.alive_since is None else state.alive_since
            if state.restarts_in_a_row and now - state.alive_since >= self.healthy_reset:
                state.restarts_in_a_row = 0
            return False
        state.alive_since = None
        window = self.grace_seconds if not state.restarts_in_a_row else max(
            self.grace_seconds, self._backoff(state.restarts_in_a_row - 1))
        if not state.ready and age < window:
            logger.info("%s is not ready yet (%.0f s of its %.0f s to start)", name, age, window)
            return False
        state.failures += 1
        logger.warning("%s failed its liveness check (%d of %d)", name, state.failures, self.failures_before_restart)
        if state.failures < self.failures_before_restart:
            return False
        wait = self._backoff(state.restarts_in_a_row - 1) if state.restarts_in_a_row else 0.0
        if now - state.last_restart < wait:
            logger.warning("%s: holding back restart %d in a row (back-off %.0f s, %.0f s left)", name,
                           state.restarts_in_a_row + 1, wait, wait - (now - state.last_restart))
            return False
        logger.warning("restarting %s (pid %s): it no longer answers", name, info["pid"])
        self.supervisor.stopProcess(name, True)
        self.supervisor.startProcess(name, False)
        state.failures = 0
        state.restarts_in_a_row += 1
        state.last_restart = now
        self.restarts.append(name)
        return True


def supervisor_proxy(socket_path: str):
    """supervisord's XML-RPC interface over its unix socket."""
    transport = SupervisorTransport(None, None, f"unix://{socket_path}")
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport).supervisor
