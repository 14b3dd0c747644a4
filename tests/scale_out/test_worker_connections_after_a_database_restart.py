"""A worker's kept database connection after a PostgreSQL restart (issue 42). A worker process keeps its connection
from one task to the next (compactweb/celery.py); a restart breaks it without any error being raised on it, so
closing the connections "that an error left unusable" before a task keeps it, and each worker process's first task
after the restart failed on it and took the outage path (the step ends "interrupted" and runs nothing). With
Django's CONN_HEALTH_CHECKS on for the workers, a task's first query checks the kept connection and a broken one is
replaced first.

Two prefork workers of one process each (each on a private queue, so the test knows which process runs what) reach
the test database through a TCP proxy (tests/scale_out/tcp_proxy.py). Each runs a simulator step (its process now
keeps a connection), the proxy is cut (every connection reset, as by a restarting server) while no task runs, and
listens again; then each worker's first task is a step, and it runs the turn. About 30 s on an idle machine."""

from __future__ import annotations

import re
import uuid

import pytest
from celery import Celery

from sessions_app.fleet import runtime as fleet
from sessions_app.models import SimulatorRun
from tests.scale_out.processes import child_env, free_port, start_worker, stop, wait_for_log
from tests.scale_out.tcp_proxy import TcpProxy
from tests.scale_out.test_redis_restart import start_redis, wait_until

STEP_TASK = "sessions_app.fleet.tasks.run_simulator_step"
DEADLINE_SECONDS = 120  # per wait, for process starts on a loaded machine
STEP_RESULT = re.compile(r"run_simulator_step\[[^\]]+\] succeeded in [0-9.]+s: '(\w+)'")


def step_results(log) -> list[str]:
    """What each simulator step this worker finished returned (Celery logs a task's result at info)."""
    return STEP_RESULT.findall(log.read_text())


@pytest.mark.services
@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
def test_after_a_database_restart_each_workers_first_task_runs_on_a_usable_connection(on_postgresql, provider,
                                                                                        policy, tmp_path):
    redis_port = free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    db = on_postgresql.settings_dict
    proxy = TcpProxy(upstream_host=db["HOST"] or "127.0.0.1", upstream_port=int(db["PORT"] or 5432)).start()
    env = child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path)
    env["DATABASE_URL"] = env["DATABASE_URL"].replace(f":{db['PORT'] or 5432}/", f":{proxy.port}/")
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=2, provider=provider, policy=policy, loop=True,
                                seed=42)
    # One session per worker: worker i runs only session i's steps.
    workers = [(f"compactweb-test-{uuid.uuid4().hex[:8]}", run.session_id, tmp_path / f"worker-{i}.log")
               for i, run in enumerate(runs)]
    redis_server = start_redis(redis_port, tmp_path)
    broker = Celery("compactweb-test", broker=f"{own_redis}/1", set_as_current=False)
    processes = []
    try:
        for queue, _, log in workers:
            processes.append(start_worker(queue=queue, env=env, log=log, pool="prefork", concurrency=1))
        for process, (_, _, log) in zip(processes, workers, strict=True):
            wait_for_log(process, log, "ready", timeout=DEADLINE_SECONDS)

        def step_everywhere(count: int) -> None:
            """Send each worker one step of its session; wait until each worker finished `count` steps."""
            for queue, session_id, _ in workers:
                broker.send_task(STEP_TASK, kwargs={"session_id": session_id}, queue=queue)
            wait_until(lambda: all(len(step_results(log)) >= count for _, _, log in workers),
                       f"each worker to finish step {count}", timeout=DEADLINE_SECONDS)

        step_everywhere(1)  # each worker process now keeps a connection
        assert [step_results(log) for _, _, log in workers] == [["ran"], ["ran"]]
        proxy.cut()  # a restart: every kept connection is reset, with no task running to notice
        proxy.restore()
        step_everywhere(2)

        # Each worker's first task after the restart ran its step (not "interrupted": the outage path).
        assert [step_results(log) for _, _, log in workers] == [["ran", "ran"], ["ran", "ran"]]
        assert all("interrupted" not in log.read_text() for _, _, log in workers)
        steps_done = dict(SimulatorRun.objects.filter(session_id__in=[s for _, s, _ in workers])
                          .values_list("session_id", "steps_done"))
        assert steps_done == {session_id: 2 for _, session_id, _ in workers}
        assert all(process.poll() is None for process in processes)
    finally:
        for process in processes:
            stop(process)
        broker.close()
        stop(redis_server)
        proxy.close()
