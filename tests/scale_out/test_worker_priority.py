"""A Celery worker starts at its given priority and lowers itself once ready, its pool processes once they ran
their first task (issue 42: on a busy host a worker started under `nice -n 10` got almost no CPU for its start-up,
and a new set's first step, run at the lowered priority, took 16.7 s at load 15). A real prefork worker with
COMPACTWEB_WORKER_NICE=7 and two pool processes: once Celery says it is ready, its main process runs at nice 7 and
both pool processes at their starting priority; after one task, the pool process that ran it runs at nice 7 and the
other still at its starting priority."""

from __future__ import annotations

import os

import pytest

from compactweb.celery import app
from compactweb.worker_priority import process_tree
from tests.scale_out.processes import child_env, start_worker, stop, wait_for_log

QUEUE = "h42-priority"


@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_a_worker_lowers_its_main_process_once_ready_and_each_pool_process_after_its_first_task(
    on_postgresql, redis_url, tmp_path
):
    env = {**child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path), "COMPACTWEB_WORKER_NICE": "7"}
    log = tmp_path / "worker.log"
    base = os.getpriority(os.PRIO_PROCESS, 0)
    lowered = min(19, base + 7)
    worker = start_worker(queue=QUEUE, env=env, log=log, pool="prefork", concurrency=2)
    try:
        wait_for_log(worker, log, "priority lowered by 7")

        tree = process_tree(worker.pid)
        assert len(tree) == 3  # the main process and its two pool children, forked before it was ready
        niceness = {pid: os.getpriority(os.PRIO_PROCESS, pid) for pid in tree}
        assert niceness == {worker.pid: lowered, tree[1]: base, tree[2]: base}

        with app.connection_for_write(redis_url) as connection:
            app.send_task("sessions_app.fleet.tasks.simulator_tick", queue=QUEUE, connection=connection)
        wait_for_log(worker, log, "first task done: this pool process's priority lowered by 7")

        niceness = {pid: os.getpriority(os.PRIO_PROCESS, pid) for pid in process_tree(worker.pid)}
        assert sorted(niceness.values()) == sorted([lowered, lowered, base]), niceness
        assert niceness[worker.pid] == lowered
    finally:
        stop(worker)
