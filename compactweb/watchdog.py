"""Liveness checks wired to restarts, for the processes supervisord runs (scripts/scale-out).

supervisord restarts a process that exits; this restarts one that is still there but no longer works: a web
process that stops answering HTTP, a worker that stops answering pings, a scheduler that stops beating (its loop
touches a heartbeat file every round, `manage.py simulate --scheduler --heartbeat-file`; a hung query or a
blocked event loop stops it). It checks liveness, not readiness: a web
process answering 503 because Redis is down is alive (restarting it would not bring Redis back), and workers are
not judged while the broker itself does not answer. A process is restarted after FAILURES_BEFORE_RESTART checks
in a row fail, and not judged during its first GRACE_SECONDS (start-up: migrations, imports).
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
RUNNING = "RUNNING"
UNKNOWN = None  # a probe that cannot judge now (the broker is down): neither a pass nor a failure


def web_alive(host: str, port: int, *, timeout: float = HTTP_TIMEOUT) -> bool:
    """True when the web process answers /healthz at all (200 or 503: a dependency down is not its death)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, urllib.error.URLError):
        return False


def worker_alive(node: str, *, timeout: float = 2.0) -> bool | None:
    """True when the named Celery worker answers a ping; None (cannot judge) when the broker does not answer."""
    try:
        check_broker()
    except Exception:
        return UNKNOWN
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
class Watchdog:
    """Restart supervisord programs whose probe fails FAILURES_BEFORE_RESTART times in a row.

    `supervisor` is supervisord's XML-RPC namespace (`proxy.supervisor`): getProcessInfo, stopProcess,
    startProcess. `probes` maps a program name to a callable answering True (alive), False, or None (unknown)."""

    supervisor: Any
    probes: dict[str, Callable[[], bool | None]]
    failures_before_restart: int = FAILURES_BEFORE_RESTART
    grace_seconds: float = GRACE_SECONDS
    clock: Callable[[], float] = time.time
    failures: dict[str, int] = field(default_factory=dict)
    restarts: list[str] = field(default_factory=list)

    def check_once(self) -> list[str]:
        """Probe every program once; returns the programs restarted."""
        restarted = []
        for name, probe in self.probes.items():
            info = self.supervisor.getProcessInfo(name)
            if info["statename"] != RUNNING or self.clock() - info["start"] < self.grace_seconds:
                self.failures[name] = 0
                continue
            alive = probe()
            if alive is UNKNOWN:
                continue
            if alive:
                self.failures[name] = 0
                continue
            self.failures[name] = self.failures.get(name, 0) + 1
            logger.warning("%s failed its liveness check (%d of %d)", name, self.failures[name],
                           self.failures_before_restart)
            if self.failures[name] >= self.failures_before_restart:
                logger.warning("restarting %s (pid %s): it no longer answers", name, info["pid"])
                self.supervisor.stopProcess(name, True)
                self.supervisor.startProcess(name, False)
                self.failures[name] = 0
                self.restarts.append(name)
                restarted.append(name)
        return restarted


def supervisor_proxy(socket_path: str):
    """supervisord's XML-RPC interface over its unix socket."""
    transport = SupervisorTransport(None, None, f"unix://{socket_path}")
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport).supervisor
