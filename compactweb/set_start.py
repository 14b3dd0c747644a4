"""The order a scale-out set starts in, and the hand-over from a set whose supervisord was killed (scripts/scale-out;
issue 42, a cold start on a busy host).

A simulator step needs a Celery worker and the scheduler only. supervisord used to start all seven programs at
once, and on a host already saturated by others each Python start got a small share of a core: after a supervisor
kill at load ~16 the workers took 80 s to be ready, competing with the web processes' and the watchdog's own
starts, and the launcher had stopped the dead set's programs first, so no step ran meanwhile. Now:

- supervisord starts the workers, the scheduler and this starter; the web processes and the watchdog are
  `autostart=false`. This starter waits for the step path, i.e. a file in the run directory's `ready/` from one of
  this set's workers (`announce_worker_ready`, on Celery's worker_ready) and one from its scheduler (after its
  first beat; the heartbeat file itself may be a dead set's scheduler's). The launcher empties `ready/` before it
  starts a set. After `--max-wait` seconds it goes on anyway (a set whose workers cannot start still serves its
  pages and /healthz, which says why).
- With `--stop-previous-set` it then stops what a killed supervisord's set still runs from this run directory
  (`stop_previous_set`): when the database needed no change, the launcher left the dead set's workers, scheduler
  and web processes serving (only its watchdog went at once), so steps went on while this set started; two
  schedulers never hand out the same step. While they still run, the wait's bound is `--hand-over-max-wait`
  (600 s): they serve meanwhile. Its web processes go first (`take_over`): stopping them frees the web ports.
- Then it asks supervisord to start the web processes and the watchdog (the watchdog judges a program from that
  program's own start), and only then stops the dead set's workers and scheduler, which may finish a running
  step first (a warm shutdown, up to DEAD_WORKERS_WAIT_SECONDS): the new web processes do not wait for that
  (issue 42: it was most of the 9 s between this set's step path being up and its web processes starting, at
  load ~20). Then it exits.

Plain Python and supervisord's XML-RPC client; no Django (it runs in the workers' and the scheduler's processes
and as its own small one).
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
DEFAULT_MAX_WAIT_SECONDS = 120.0
# While a previous set still serves, this set has no reason to hurry: its start on a host at load 20-25 took over
# 120 s, and stopping the previous set then left no worker at all until this set's were up.
DEFAULT_HAND_OVER_MAX_WAIT_SECONDS = 600.0
POLL_SECONDS = 0.5
# How long the dead set's workers may take to finish their running step once this set took over: what scripts/
# scale-out gives its own workers (stopwaitsecs). Nothing waits for them any more, and one KILLed mid-step leaves
# its session's lease to expire (30 s without a step there): with the orphan wait's 10 s, while the new web
# processes started beside them at load ~20, two runs of three killed one (issue 42).
DEAD_WORKERS_WAIT_SECONDS = 60.0
ALREADY_STARTED = 60  # supervisord's fault code: the program runs already (started by hand meanwhile)


def announce_ready(kind: str, run_dir: str | None = None) -> Path | None:
    """In a set's process: leave `ready/<kind>-<pid>` in the run directory (the launcher empties `ready/` before
    it starts a set, so a file there is this set's even while a previous set's processes still run). Outside a set
    (no run directory in the environment) nothing."""
    run_dir = run_dir or os.environ.get(RUN_DIR_ENV)
    if not run_dir:
        return None
    ready = Path(run_dir) / READY_DIR
    ready.mkdir(exist_ok=True)
    marker = ready / f"{kind}-{os.getpid()}"
    marker.touch()
    return marker


def announce_worker_ready(run_dir: str | None = None, **signal_kwargs) -> Path | None:
    """Celery's worker_ready, in a set's worker."""
    return announce_ready("worker", run_dir)


def step_path_ready(run_dir: Path) -> bool:
    """One of this set's workers is ready and its scheduler has beaten (its first round reached the database):
    a step can be claimed and run."""
    ready = run_dir / READY_DIR
    return any(ready.glob("worker-*")) and any(ready.glob("scheduler-*"))


def start_when_ready(run_dir: Path, programs: list[str], *, supervisor, max_wait: float = DEFAULT_MAX_WAIT_SECONDS,
                     clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                     poll: float = POLL_SECONDS, before_start: Callable[[], None] = lambda: None) -> bool:
    """Wait (up to `max_wait` seconds) for the step path, run `before_start`, then start `programs` through
    supervisord; whether the step path was up when they were started."""
    began = clock()
    ready = step_path_ready(run_dir)
    while not ready and clock() - began < max_wait:
        sleep(poll)
        ready = step_path_ready(run_dir)
    before_start()
    for name in programs:
        try:
            supervisor.startProcess(name, False)
        except xmlrpc.client.Fault as fault:
            if fault.faultCode != ALREADY_STARTED:
                raise
    return ready


WEB_COMMANDS = ["daphne"]  # a web program's command line has this among its arguments (scripts/scale-out)


def stop_previous_set(run_dir: Path, *, wait: float, supervisord: int | None = None,
                      stop: Callable[..., list[int]] | None = None, commands: list[str] | None = None) -> list[int]:
    """The hand-over (scripts/scale-out after a supervisord was killed and the database needs no change): the
    previous set's workers, scheduler and web processes served on while this set started; now that this set's step
    path is up, they stop (orphans.stop_orphans: TERM, a worker's running step finishes, KILL after `wait`), which
    also frees the web ports; with `commands`, only those with one of these words among their arguments (and
    theirs). This set is what runs under `supervisord` (this starter's parent) and is left alone; without a
    supervisord parent nothing is stopped (a starter run by hand must not judge what is whose)."""
    from compactweb import orphans

    supervisord = os.getppid() if supervisord is None else supervisord
    try:
        parent = (orphans.PROC / str(supervisord) / "cmdline").read_bytes()
    except OSError:
        return []
    if b"supervisord" not in parent:
        return []
    stop = stop or orphans.stop_orphans
    return stop(str(run_dir), wait=wait,
                find=lambda run: orphans.marked_processes(run, outside=supervisord, commands=commands))


def previous_set_runs(run_dir: Path, *, supervisord: int | None = None) -> bool:
    """Whether a killed supervisord's set still runs from this run directory (see `stop_previous_set`)."""
    from compactweb import orphans

    supervisord = os.getppid() if supervisord is None else supervisord
    return bool(orphans.marked_processes(str(run_dir), outside=supervisord))


def take_over(run_dir: Path, programs: list[str], *, supervisor, max_wait: float, stop_previous: bool,
              orphan_wait: float, stop: Callable[..., list[int]] = stop_previous_set,
              say: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic) -> bool:
    """Wait for the step path, then (with `stop_previous`) stop the previous set's web processes, start
    `programs`, and stop the rest of the previous set (its workers and scheduler, a running step finishing first):
    the new web processes wait only for the ports. Says what it did; whether the step path was up."""
    began = clock()

    def stopped(pids: list[int], what: str) -> None:
        if pids:
            say(f"set start: stopped {len(pids)} {what} process(es) the previous set ran until now: {pids} "
                f"({clock() - began:.1f} s)")

    def stop_previous_web() -> None:
        if stop_previous:
            stopped(stop(run_dir, wait=orphan_wait, commands=WEB_COMMANDS), "web")

    ready = start_when_ready(run_dir, programs, supervisor=supervisor, max_wait=max_wait,
                             before_start=stop_previous_web)
    waited = clock() - began
    if ready:
        say(f"set start: a worker and the scheduler are up; started {', '.join(programs)} ({waited:.1f} s)")
    else:
        say(f"set start: no worker ready or no scheduler beat within {max_wait:g} s; started "
            f"{', '.join(programs)} anyway ({waited:.1f} s)")
    if stop_previous:
        stopped(stop(run_dir, wait=max(orphan_wait, DEAD_WORKERS_WAIT_SECONDS)), "other")
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
    parser.add_argument("--stop-previous-set", action="store_true",
                        help="first stop what a killed supervisord's set still runs from this run directory")
    parser.add_argument("--orphan-wait", type=float, default=10.0)
    parser.add_argument("--hand-over-max-wait", type=float, default=DEFAULT_HAND_OVER_MAX_WAIT_SECONDS,
                        help="the wait's bound while a previous set still serves (its pages and steps)")
    args = parser.parse_args(argv)
    programs = [name for name in args.programs.split(",") if name]
    run_dir = Path(args.run_dir)
    max_wait = args.max_wait
    if args.stop_previous_set and previous_set_runs(run_dir):
        max_wait = max(max_wait, args.hand_over_max_wait)
    take_over(run_dir, programs, supervisor=supervisor_proxy(args.supervisor_socket), max_wait=max_wait,
              stop_previous=args.stop_previous_set, orphan_wait=args.orphan_wait,
              say=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
