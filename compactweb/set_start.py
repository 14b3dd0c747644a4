"""The order a scale-out set starts in (scripts/scale-out; issue 42, a cold start on a busy host).

A simulator step needs a Celery worker and the scheduler only. supervisord used to start all seven programs at
once, and on a host already saturated by others each Python start got a small share of a core: after a supervisor
kill at load ~16 the workers took 80 s to be ready, competing with the web processes' and the watchdog's own
starts. So supervisord now starts the workers, the scheduler and this starter; the web processes and the watchdog
are `autostart=false`, and this starter asks supervisord to start them once the step path is up: a worker said it
is ready (`announce_worker_ready`, on Celery's worker_ready, leaves a file in the run directory's `ready/`) and the
scheduler has beaten (its heartbeat file; the launcher removes both before it starts a set, once the previous set's
processes are gone, so what is there is this set's). It starts them after `--max-wait` seconds anyway (a set whose workers cannot start still serves its pages and /healthz, which says why), and then exits.

The watchdog starts with the web processes: it judges a program from that program's own start, so a web process
started late is not restarted for not answering while the watchdog's clock ran. Plain Python and supervisord's
XML-RPC client; no Django (it runs in the workers' signal handler and as its own small process).
"""

from __future__ import annotations

import argparse
import os
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path

RUN_DIR_ENV = "COMPACTWEB_SCALE_OUT_RUN_DIR"  # set by scripts/scale-out for every process of a set
READY_DIR = "ready"
HEARTBEAT_FILE = "scheduler.heartbeat"
DEFAULT_MAX_WAIT_SECONDS = 120.0
POLL_SECONDS = 0.5
ALREADY_STARTED = 60  # supervisord's fault code: the program runs already (started by hand meanwhile)


def announce_worker_ready(run_dir: str | None = None, **signal_kwargs) -> Path | None:
    """Celery's worker_ready, in a set's worker: leave `ready/worker-<pid>` in the run directory. Outside a set
    (no run directory in the environment) nothing."""
    run_dir = run_dir or os.environ.get(RUN_DIR_ENV)
    if not run_dir:
        return None
    ready = Path(run_dir) / READY_DIR
    ready.mkdir(exist_ok=True)
    marker = ready / f"worker-{os.getpid()}"
    marker.touch()
    return marker


def step_path_ready(run_dir: Path) -> bool:
    """A worker announced it is ready and the scheduler has beaten: a step can be claimed and run."""
    return (run_dir / HEARTBEAT_FILE).exists() and any((run_dir / READY_DIR).glob("worker-*"))


def start_when_ready(run_dir: Path, programs: list[str], *, supervisor, max_wait: float = DEFAULT_MAX_WAIT_SECONDS,
                     clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                     poll: float = POLL_SECONDS) -> bool:
    """Wait (up to `max_wait` seconds) for the step path, then start `programs` through supervisord; whether the
    step path was up when they were started."""
    began = clock()
    ready = step_path_ready(run_dir)
    while not ready and clock() - began < max_wait:
        sleep(poll)
        ready = step_path_ready(run_dir)
    for name in programs:
        try:
            supervisor.startProcess(name, False)
        except xmlrpc.client.Fault as fault:
            if fault.faultCode != ALREADY_STARTED:
                raise
    return ready


def supervisor_proxy(socket_path: str):
    """supervisord's XML-RPC interface over its unix socket."""
    from supervisor.xmlrpc import SupervisorTransport

    transport = SupervisorTransport(None, None, f"unix://{socket_path}")
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport).supervisor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--supervisor-socket", required=True)
    parser.add_argument("--programs", required=True, help="comma-separated supervisord program names")
    parser.add_argument("--max-wait", type=float, default=DEFAULT_MAX_WAIT_SECONDS)
    args = parser.parse_args(argv)
    programs = [name for name in args.programs.split(",") if name]
    began = time.monotonic()
    ready = start_when_ready(Path(args.run_dir), programs, supervisor=supervisor_proxy(args.supervisor_socket),
                             max_wait=args.max_wait)
    waited = time.monotonic() - began
    if ready:
        print(f"set start: a worker and the scheduler are up after {waited:.1f} s; started {', '.join(programs)}",
              flush=True)
    else:
        print(f"set start: no worker ready or no scheduler beat within {args.max_wait:g} s; started "
              f"{', '.join(programs)} anyway", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
