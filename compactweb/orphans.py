"""The processes a killed supervisord left behind (scripts/scale-out), found and stopped before a new set starts.

scripts/scale-out marks every process of a set: supervisord's environment carries MARKER=<the run directory>, and
every program it starts (and every process those start, e.g. Celery's prefork children) inherits it. A supervisord
that is SIGKILLed leaves its programs serving unsupervised; a new launcher, once it holds the set's lock, runs
`python -m compactweb.orphans --run-dir <dir>`, which sends TERM to the top processes of that set (a Celery worker's
main process then shuts down warm: its running tasks finish), waits up to `--wait` seconds for every marked process
to end, and KILLs what is left. A process that ignores TERM (its SigIgn mask in /proc says so: a hung or stubborn
program) is KILLed at once instead of holding the new set's start for the whole wait (issue 42), and a process
whose parent is gone (a new top) gets its TERM when it is seen. Linux /proc only; plain Python, no Django.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

MARKER = "COMPACTWEB_SCALE_OUT_RUN_DIR"
DEFAULT_WAIT_SECONDS = 60.0
PROC = Path("/proc")


def marked_processes(run_dir: str, *, proc: Path = PROC, outside: int | None = None,
                     commands: list[str] | None = None) -> dict[int, int]:
    """{pid: parent pid} of the processes whose environment names `run_dir` under MARKER (this process excepted);
    with `outside`, not those under that pid (the running set's supervisord: its programs are marked too); with
    `commands`, only those with one of these words among their command line's arguments (and their descendants)."""
    wanted = f"{MARKER}={run_dir}".encode()
    found, command_lines = {}, {}
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if commands:
                command_lines[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            found[int(entry.name)] = int(parent)
    if outside is not None:
        found = {pid: parent for pid, parent in found.items() if not _under(pid, outside, found)}
    if commands:
        words = {word.encode() for word in commands}
        found = {pid: parent for pid, parent in found.items()
                 if any(words & set(command_lines.get(p, ())) for p in _line(pid, found))}
    return found


def _line(pid: int, parents: dict[int, int]) -> list[int]:
    """`pid` and its ancestors among `parents`."""
    line = [pid]
    while parents.get(line[-1]) in parents and len(line) <= len(parents):
        line.append(parents[line[-1]])
    return line


def _under(pid: int, top: int, parents: dict[int, int]) -> bool:
    return pid == top or parents.get(pid) == top or any(parents.get(p) == top for p in _line(pid, parents))


def ignores_term(pid: int, *, proc: Path = PROC) -> bool:
    """Whether the process ignores SIGTERM (its SigIgn mask in /proc/<pid>/status): TERM will never end it."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def stop_orphans(run_dir: str, *, wait: float = DEFAULT_WAIT_SECONDS, find: Callable = marked_processes,
                 kill: Callable[[int, int], None] = os.kill, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, stubborn: Callable[[int], bool] = ignores_term
                 ) -> list[int]:
    """TERM the top marked processes (those whose parent is not marked), KILL at once those that ignore TERM,
    wait for every marked one to end (up to `wait` seconds; a process left without its parent meanwhile gets its
    TERM then), then KILL the rest. Returns the pids found at first."""
    marked = find(run_dir)
    termed: set[int] = set()
    deadline = clock() + wait
    left = marked
    while left and clock() < deadline:
        for pid, parent in left.items():
            if parent in left or pid in termed:
                continue
            termed.add(pid)
            _signal(kill, pid, signal.SIGKILL if stubborn(pid) else signal.SIGTERM)
        sleep(0.2)
        left = find(run_dir)
    for pid in left:
        _signal(kill, pid, signal.SIGKILL)
    return sorted(marked)


def _signal(kill: Callable[[int, int], None], pid: int, sig: int) -> None:
    try:
        kill(pid, sig)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--wait", type=float, default=DEFAULT_WAIT_SECONDS)
    parser.add_argument("--only", metavar="WORD", action="append",
                        help="only the processes with WORD among their arguments (e.g. watchdog), and theirs; "
                             "repeatable")
    args = parser.parse_args(argv)
    stopped = stop_orphans(args.run_dir, wait=args.wait,
                           find=functools.partial(marked_processes, commands=args.only))
    if stopped:
        print(f"scale-out: stopped {len(stopped)} process(es) a previous set left running: {stopped}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
