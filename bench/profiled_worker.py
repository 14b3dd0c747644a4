"""`celery` with every prefork child under cProfile, for bench_load.py --profile-workers:

    python bench/profiled_worker.py DIR -A compactweb worker --pool prefork ...

Each child profiles CPU time (time.thread_time: waits for the model, the database and the broker count nothing)
on its two busy threads: the task's thread (the step's database calls) and the step loop's thread (the turn's
coroutine, sessions_app.fleet.runtime._StepLoop). It starts when the child is forked (worker_process_init) and
writes DIR/worker-<pid>-task.prof and DIR/worker-<pid>-loop.prof when the child exits (worker_process_shutdown: a
warm shutdown). Read them with pstats (`pstats.Stats(a, b).sort_stats("tottime")`).
"""

from __future__ import annotations

import cProfile
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    out = Path(sys.argv[1])
    sys.argv = ["celery", *sys.argv[2:]]
    sys.path.insert(0, str(ROOT))
    from celery.__main__ import main as celery_main
    from celery.signals import worker_process_init, worker_process_shutdown

    task_thread = cProfile.Profile(time.thread_time)
    loop_thread = cProfile.Profile(time.thread_time)

    def start(**kwargs) -> None:
        from sessions_app.fleet import runtime

        task_thread.enable()
        runtime._step_loop.loop().call_soon_threadsafe(loop_thread.enable)

    def dump(**kwargs) -> None:
        from sessions_app.fleet import runtime

        task_thread.disable()
        loop = runtime._step_loop.loop()
        loop.call_soon_threadsafe(loop_thread.disable)
        time.sleep(0.2)
        task_thread.dump_stats(out / f"worker-{os.getpid()}-task.prof")
        loop_thread.dump_stats(out / f"worker-{os.getpid()}-loop.prof")

    worker_process_init.connect(start, weak=False)
    worker_process_shutdown.connect(dump, weak=False)
    celery_main()


if __name__ == "__main__":
    main()
