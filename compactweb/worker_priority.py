"""A Celery worker's CPU priority: normal while it starts, lowered once it is ready (issue 42).

scripts/scale-out ran its workers under `nice -n 10` from the first instruction, so that a busy fleet would not
keep the web processes waiting for a core (docs/benchmarks.md, "Round five"). On a host that is busy already, a
worker at nice 10 got almost no CPU for its start (Django, the tokenizer's tables, the pool's fork): after a
supervisor kill at load 16 the set served no step for minutes. So the worker starts at the priority it was given
and lowers itself (its main process and its pool's children; children forked later inherit it) by
COMPACTWEB_WORKER_NICE when Celery says it is ready (`worker_ready`). Plain Python and /proc (Linux); no Django.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

NICE_ENV = "COMPACTWEB_WORKER_NICE"
PROC = Path("/proc")


def worker_nice() -> int:
    """The niceness to add once ready (0: none), from the environment, clamped to 0..19."""
    try:
        return max(0, min(19, int(os.environ.get(NICE_ENV, "0"))))
    except ValueError:
        return 0


def process_tree(pid: int, *, proc: Path = PROC) -> list[int]:
    """`pid` and its descendants (from /proc/<pid>/task/<tid>/children), parents first."""
    tree, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        tree.append(current)
        for task in (proc / str(current) / "task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return tree


def lower_priority(*, by: int, pid: int | None = None) -> list[int]:
    """Add `by` to the niceness of the process and its descendants; returns the pids changed."""
    changed = []
    for each in process_tree(os.getpid() if pid is None else pid):
        try:
            os.setpriority(os.PRIO_PROCESS, each, min(19, os.getpriority(os.PRIO_PROCESS, each) + by))
            changed.append(each)
        except (ProcessLookupError, PermissionError):
            continue
    return changed


def lower_when_ready(**signal_kwargs) -> None:
    """worker_ready: the worker started at its given priority; from now on it yields to the web processes."""
    by = worker_nice()
    if by:
        changed = lower_priority(by=by)
        logger.info("worker ready: priority lowered by %d (nice) for %d process(es)", by, len(changed))
