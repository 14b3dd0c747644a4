"""A Celery worker starts at its given priority and lowers itself once ready (issue 42: on a busy host a worker
started under `nice -n 10` got almost no CPU for its start-up). A real prefork worker with
COMPACTWEB_WORKER_NICE=7: once Celery says it is ready, its main process and every pool child run at nice 7, and
its log says it lowered the three of them (forked before, at normal priority)."""

from __future__ import annotations

import os

import pytest

from compactweb.worker_priority import process_tree
from tests.scale_out.processes import child_env, start_worker, stop, wait_for_log


@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_a_worker_lowers_its_priority_once_ready_and_not_before(on_postgresql, redis_url, tmp_path):
    env = {**child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path), "COMPACTWEB_WORKER_NICE": "7"}
    log = tmp_path / "worker.log"
    base = os.getpriority(os.PRIO_PROCESS, 0)
    worker = start_worker(queue="h42-priority", env=env, log=log, pool="prefork", concurrency=2)
    try:
        wait_for_log(worker, log, "priority lowered by 7")
        # Lowered when Celery signals ready, after the pool's children were forked at normal priority: they run at
        # nice 7 because the worker lowered them, not because they inherited it.
        assert "priority lowered by 7 (nice) for 3 process(es)" in log.read_text()
        tree = process_tree(worker.pid)
        assert len(tree) >= 3  # the main process and its two pool children
        assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in tree} == {min(19, base + 7)}
    finally:
        stop(worker)
