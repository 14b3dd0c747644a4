"""A Celery worker's CPU priority: normal while it starts, lowered once it is ready (issue 42).

scripts/scale-out ran its workers under `nice -n 10` from the first instruction, so that a busy fleet would not
keep the web processes waiting for a core (docs/benchmarks.md, "Round five"). On a host that is busy already, a
worker at nice 10 got almost no CPU for its start (Django, the tokenizer's tables, the pool's fork): after a
supervisor kill at load 16 the set served no step for minutes. So the worker starts at the priority it was given
and lowers its main process by COMPACTWEB_WORKER_NICE when Celery says it is ready (`worker_ready`); each pool
process lowers itself once it has run its first task. A pool process's first task is the rest of its start (its
database connection, the caches a step warms): lowered at ready, a new set's first step took 16.7 s at load 15
after a supervisor kill, where the dead set's steps took 3-10 s (issue 42). A pool process forked after the main
process lowered itself starts lowered (it inherits the niceness) and stays so. Plain Python and /proc (Linux); no
Django.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

NICE_ENV = "COMPACTWEB_WORKER_NICE"
PROC = Path("/proc")
# The niceness this worker started at (worker_init, in the main process; its pool processes inherit the value).
_started_at: int | None = None


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


def remember_start_priority(**signal_kwargs) -> None:
    """worker_init: note the niceness the worker started at, before anything lowers it."""
    global _started_at
    _started_at = os.getpriority(os.PRIO_PROCESS, 0)


def lower_this_process(by: int) -> bool:
    """Run this process at the worker's starting niceness + `by` (at most 19); whether it was higher until now.
    Idempotent: a process lowered already, or forked from one, is left as it is."""
    started_at = os.getpriority(os.PRIO_PROCESS, 0) if _started_at is None else _started_at
    target = min(19, started_at + by)
    if os.getpriority(os.PRIO_PROCESS, 0) >= target:
        return False
    os.setpriority(os.PRIO_PROCESS, 0, target)
    return True


def lower_when_ready(**signal_kwargs) -> None:
    """worker_ready: the worker started at its given priority; from now on its main process yields to the web
    processes (its pool processes once they ran their first task: `lower_after_first_task`)."""
    by = worker_nice()
    if by and lower_this_process(by):
        logger.info("worker ready: priority lowered by %d (nice); each pool process lowers its own after its first "
                    "task", by)


def lower_after_first_task(**signal_kwargs) -> None:
    """task_postrun, in the process that ran the task: once its first task is done (its start is over), a pool
    process yields to the web processes too. A solo worker's main process was lowered at ready already."""
    by = worker_nice()
    if by and lower_this_process(by):
        logger.info("first task done: this pool process's priority lowered by %d (nice)", by)
