"""A step lost with the broker comes back within seconds of the broker's return (issue 15). The real scheduler
(`manage.py simulate --scheduler`) sends a looping session's step to a private redis-server that no worker reads
yet; Redis is then SIGKILLed without persistence, so the queued step is gone, and restarted empty on the same port.
The scheduler notices the outage and the return (housekeeping, every 2 s) and offers the step again: a step message
is back in the queue within seconds of Redis answering, instead of after the step's two-minute claim. A worker
started afterwards runs it, once: the rollout is contiguous and the scenario's first step ran exactly once.
About 20 s on an idle machine (two process starts)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest

from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks, logs_under
from tests.scale_out.processes import child_env, free_port, start_scheduler, start_worker, stop, wait_for_log
from tests.scale_out.test_redis_restart import wait_until

DEADLINE_SECONDS = 90  # per wait, for process starts on a loaded machine
BACK_WITHIN_SECONDS = 10  # housekeeping's 2 s, a tick, a reconnect to the broker, and slack
QUEUE = "celery"  # the default queue the scheduler sends steps to


def start_volatile_redis(port: int, workdir) -> subprocess.Popen:
    """A redis-server that keeps nothing across a crash (no RDB snapshot, no AOF): what a hard crash of a broker
    without persistence loses."""
    import redis

    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is not installed: this test starts its own")
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
         str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )
    client = redis.Redis(port=port, socket_connect_timeout=0.2)
    wait_until(lambda: _answers(client), f"redis-server on port {port}", timeout=DEADLINE_SECONDS)
    return process


def _answers(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_step_lost_with_the_broker_is_offered_again_within_seconds_of_its_return(
    on_postgresql, provider, policy, tmp_path
):
    import redis

    port = free_port()
    own_redis = f"redis://127.0.0.1:{port}"
    env = child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path)
    deadlocks_before = database_deadlocks()
    (run,) = fleet.do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy,
                                  turns_per_minute=600, loop=True, seed=15)
    broker = redis.Redis(port=port, db=1, socket_connect_timeout=0.5)
    logs = {name: tmp_path / f"{name}.log" for name in ("scheduler", "worker")}
    redis_server = start_volatile_redis(port, tmp_path)
    scheduler = worker = None
    try:
        scheduler = start_scheduler(env=env, log=logs["scheduler"])
        wait_until(lambda: broker.llen(QUEUE) == 1, f"the step to be sent\n{logs['scheduler'].read_text()[-3000:]}",
                   timeout=DEADLINE_SECONDS)
        time.sleep(1)
        assert broker.llen(QUEUE) == 1  # one step per run: claimed, so no second is sent while it waits

        redis_server.send_signal(signal.SIGKILL)  # the queued step dies with the broker
        redis_server.wait(timeout=10)
        wait_until(lambda: "the broker does not answer" in logs["scheduler"].read_text(),
                   f"the scheduler to notice the outage\n{logs['scheduler'].read_text()[-3000:]}",
                   timeout=DEADLINE_SECONDS)
        redis_server = start_volatile_redis(port, tmp_path)
        back_at = time.monotonic()
        assert broker.llen(QUEUE) == 0  # lost

        wait_until(lambda: broker.llen(QUEUE) >= 1,
                   f"the lost step to be offered again\n{logs['scheduler'].read_text()[-3000:]}",
                   timeout=BACK_WITHIN_SECONDS)
        offered_after = time.monotonic() - back_at
        assert "the broker is back: offered 1 unsent or lost step(s) again" in logs["scheduler"].read_text()

        worker = start_worker(queue=QUEUE, env=env, log=logs["worker"])
        wait_for_log(worker, logs["worker"], "ready", timeout=DEADLINE_SECONDS)
        contexts = RolloutLine.objects.filter(session_id=run.session_id, kind="turn_context",
                                              payload__has_key="step")
        wait_until(lambda: contexts.exists(), f"the step to run\n{logs['worker'].read_text()[-3000:]}",
                   timeout=DEADLINE_SECONDS)
        fleet.do_stop_run()
        stop(scheduler)
        scheduler = None
        stop(worker)
        worker = None
    finally:
        for process in (worker, scheduler, redis_server):
            if process is not None:
                stop(process, sig=signal.SIGKILL)
        broker.close()

    assert offered_after < BACK_WITHIN_SECONDS
    steps = [line.payload["step"] for line in contexts.order_by("seq")]
    assert steps == list(range(len(steps))) and steps[0] == 0  # the lost step ran once, then the next ones
    seqs = list(RolloutLine.objects.filter(session_id=run.session_id).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    print(assert_fault_run_clean([run.session_id], logs=logs_under(tmp_path), deadlocks_before=deadlocks_before))
