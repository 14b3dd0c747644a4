"""Benchmark: the CPU each Python start on a scale-out set's path takes, from its spawn to the moment it is of use
(issue 42, the cold start after a supervisor kill on a busy host).

On a saturated host a start's wall time is its CPU divided by the small share of a core its scheduling group gets
(docs/benchmarks.md, "The new set's own start after a supervisor kill, round five"), so CPU seconds are what a
change to the start can lower. Each start is run `--runs` times in a fresh process, one after the other; the table
gives the median and the range of the CPU (user + system) of its process tree (the process and its children,
reaped or alive) at the moment it is of use:

- `django.setup()` + the worker's imports: a bare `django.setup()`, the Celery app and the simulator's tasks (what
  every Celery worker, the scheduler and `manage.py` commands of the set pay), and the same as an entry point of
  the app runs it (the cyclic collector paused until the apps are ready, compactweb.startup_gc);
- a worker to ready: `python -m compactweb.celery_worker` as scripts/scale-out runs it, and `celery -A compactweb
  worker` (Celery's umbrella command), until its `ready/worker-<pid>` file;
- the scheduler to its first beat: `manage.py simulate --scheduler`, until its `ready/scheduler-<pid>` file;
- the launcher's helpers: the orphan stop (`python -m compactweb.orphans`) and the starter's module.

Needs DATABASE_URL (PostgreSQL, migrated) and CELERY_BROKER_URL/REDIS_URL (a Redis), as scripts/scale-out does. The
bytecode is what this interpreter would read (run it twice: the first run may write it).

    .venv/bin/python bench/bench_start_cpu.py [--runs 5] [--only setup,worker,scheduler,helpers]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")
SETUP = "import django; django.setup(); import compactweb.celery; import sessions_app.fleet.tasks"
# The same as an entry point of the app starts it (manage.py, compactweb.asgi, compactweb.celery_worker): the cyclic
# collector paused until the apps are ready, where the tree has that (compactweb.startup_gc).
ENTRY_SETUP = ("import compactweb.startup_gc as s; getattr(s, 'pause_collector', lambda: None)(); " + SETUP)


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of `pid`, its live descendants and the children they reaped."""
    total, queue = 0.0, [pid]
    while queue:
        current = queue.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15]) / TICKS
            for task in Path(f"/proc/{current}/task").iterdir():
                queue += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return total


def run_to_exit(argv: list[str], env: dict) -> float:
    """CPU seconds of a command run to its end."""
    before = os.times()
    subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def run_until(argv: list[str], env: dict, ready: Callable[[], bool], timeout: float = 300) -> float:
    """CPU seconds of a long-running command's process tree when `ready()` first holds; then it is stopped."""
    process = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[2:5]} ended or took over {timeout} s before it was ready")
            time.sleep(0.05)
        return tree_cpu(process.pid)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def set_env(run_dir: Path) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "compactweb.settings", "PYTHONPATH": str(ROOT),
           "COMPACTWEB_SCALE_OUT_RUN_DIR": str(run_dir)}
    env.setdefault("CELERY_BROKER_URL", env.get("REDIS_URL", ""))
    return env


def fresh_ready(run_dir: Path, kind: str) -> Callable[[], bool]:
    ready = run_dir / "ready"
    shutil.rmtree(ready, ignore_errors=True)
    ready.mkdir(parents=True)
    return lambda: any(ready.glob(f"{kind}-*"))


def starts(run_dir: Path) -> dict[str, Callable[[], float]]:
    env = set_env(run_dir)
    options = ["--pool", "prefork", "--concurrency", "1", "-n", "bench-start@%h", "--without-mingle",
               "--without-gossip", "-l", "info"]
    worker_env = {**env, "CELERY_SKIP_CHECKS": "1", "COMPACTWEB_WORKER_NICE": "0"}
    scheduler = [PY, "manage.py", "simulate", "--scheduler", "--skip-checks", "--heartbeat-file",
                 str(run_dir / "heartbeat")]
    return {
        "setup": lambda: run_to_exit([PY, "-c", SETUP], env),
        "entry setup": lambda: run_to_exit([PY, "-c", ENTRY_SETUP], env),
        "worker": lambda: run_until([PY, "-m", "compactweb.celery_worker", *options], worker_env,
                                    fresh_ready(run_dir, "worker")),
        "celery worker": lambda: run_until([PY, "-m", "celery", "-A", "compactweb", "worker", *options], worker_env,
                                           fresh_ready(run_dir, "worker")),
        "scheduler": lambda: run_until(scheduler, env, fresh_ready(run_dir, "scheduler")),
        "orphans": lambda: run_to_exit([PY, "-m", "compactweb.orphans", "--run-dir", str(run_dir), "--only",
                                        "watchdog", "--wait", "0"], env),
        "starter module": lambda: run_to_exit([PY, "-c", "import compactweb.set_start; "
                                               "compactweb.set_start.supervisor_proxy('x')"], env),
    }


LABELS = {
    "setup": "`django.setup()` + the worker's imports",
    "entry setup": "the same, as an entry point runs it (collector paused where the tree does that)",
    "worker": "a worker to ready (`python -m compactweb.celery_worker`, as scripts/scale-out starts it)",
    "celery worker": "a worker to ready (`celery -A compactweb worker`)",
    "scheduler": "the scheduler to its first beat",
    "orphans": "the orphan stop (nothing to stop)",
    "starter module": "the starter's imports",
}
GROUPS = {"setup": ["setup", "entry setup"], "worker": ["worker", "celery worker"], "celery": ["celery worker"], "scheduler": ["scheduler"],
          "helpers": ["orphans", "starter module"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="setup,worker,scheduler,helpers")
    args = parser.parse_args()
    names = [name for group in args.only.split(",") for name in GROUPS[group]]
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        measured = starts(Path(tmp))
        results = {name: [] for name in names}
        for _ in range(args.runs):  # interleaved, so a change in the host's load touches every start alike
            for name in names:
                results[name].append(measured[name]())
    print(f"| start | CPU s, median of {args.runs} | range |")
    print("|---|---:|---|")
    for name, values in results.items():
        print(f"| {LABELS[name]} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |")


if __name__ == "__main__":
    main()
