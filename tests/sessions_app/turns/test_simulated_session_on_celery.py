"""The end-to-end simulator test with every step run by a real Celery worker on Redis (issue 5, scale-out).

The test process plays the scheduler (claims due runs and sends `run_simulator_step` tasks); a worker subprocess
(`celery -A compactweb worker --pool solo`) runs them against the same database: the SQLite test file, or the
PostgreSQL test database. A private queue keeps other workers on the same Redis out of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from celery import Celery
from django.db import connection

from compaction_app.models import Compaction
from sessions_app.fleet import runtime as fleet
from sessions_app.models import SimulatorRun
from tests.sessions_app.turns.story import check_story
from tests.sessions_app.turns.test_simulated_session_end_to_end import MAX_STEPS, SCENARIO, SEED, WINDOW

ROOT = Path(__file__).resolve().parents[3]
DEADLINE_SECONDS = 120


def _database_env() -> dict[str, str]:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return {"SQLITE_PATH": str(db["NAME"])}
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return {"DATABASE_URL": f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"}


def _start_worker(redis_url: str, queue: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, **_database_env(), "CELERY_BROKER_URL": redis_url, "DJANGO_SETTINGS_MODULE":
           "compactweb.settings", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "compactweb", "worker", "--pool", "solo", "-Q", queue,
         "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "info"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_simulated_session_runs_on_a_celery_worker_and_tells_the_same_story(redis_url, provider, policy, tmp_path):
    import redis

    queue = f"compactweb-test-{uuid.uuid4().hex[:8]}"
    broker = Celery("compactweb-test", broker=redis_url, set_as_current=False)
    run = fleet.do_start_fleet(scenario=SCENARIO, count=1, provider=provider, policy=policy, seed=SEED,
                               loop=True, context_window=WINDOW)[0]
    log = tmp_path / "worker.log"
    worker = _start_worker(redis_url, queue, log)
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        sent = 0
        while time.monotonic() < deadline and sent < MAX_STEPS:
            assert worker.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
            done = SimulatorRun.objects.get(pk=run.pk).steps_done
            phases = set(Compaction.objects.filter(session_id=run.session_id).values_list("phase", flat=True))
            if {"pre_turn", "mid_turn"} <= phases and done == sent:
                break
            if done == sent and fleet.claim_due_runs(limit=1) == [run.session_id]:
                broker.send_task("sessions_app.fleet.tasks.run_simulator_step", kwargs={"session_id": run.session_id},
                                 queue=queue)
                sent += 1
            time.sleep(0.05)
        assert {"pre_turn", "mid_turn"} <= phases, (
            f"no pre- and mid-turn compaction after {sent} steps:\n{log.read_text()[-3000:]}")
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=5)
        redis.Redis.from_url(redis_url).delete(queue)
        broker.close()

    seen = check_story(run.session)
    assert seen["pre_turn"] >= 1 and seen["mid_turn"] >= 1
    run.refresh_from_db()
    assert run.steps_done == seen["turns"] == sent and run.last_error == ""
    assert "sessions_app.fleet.tasks.run_simulator_step" in log.read_text()
