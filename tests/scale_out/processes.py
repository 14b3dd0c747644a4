"""Subprocesses of the scale-out tests (Daphne, Celery workers, the simulator scheduler) sharing the test database
and Redis: started with bounded waits, always stopped (TERM, then KILL) by the caller's `finally`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 240.0  # a bound for a broken start only: on a saturated host Django takes long to start


def database_env() -> dict[str, str]:
    """DATABASE_URL of the PostgreSQL test database this test runs on, or SQLITE_PATH of the SQLite one (the
    subprocesses join it)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"SQLITE_PATH": db["NAME"]}
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return {"DATABASE_URL": f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"}


def child_env(*, redis_url: str, broker_url: str, var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "COMPACTWEB_RUN_SIMULATOR")}
    env.update(database_env())
    env.update(
        REDIS_URL=redis_url, CELERY_BROKER_URL=broker_url, COMPACTWEB_VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="compactweb.settings", PYTHONPATH=str(ROOT), DJANGO_DEBUG="0",
        # the same key as this process, so a session cookie minted here is valid there
        DJANGO_SECRET_KEY=settings.SECRET_KEY,
    )
    return env


_last_port = 0


def free_port() -> int:
    """A free port: the kernel's choice, or with COMPACTWEB_TEST_PORTS=FIRST-LAST (runs that share a machine each
    keep to their own range) the next port pair of that range after the last one handed out (round robin, so two
    calls before either port is bound differ) whose both ports bind (some tests use port + 1 too)."""
    global _last_port
    ports = os.environ.get("COMPACTWEB_TEST_PORTS", "")
    if ports:
        first, last = (int(x) for x in ports.split("-"))
        pairs = list(range(first, last, 2))
        start = next((i + 1 for i, port in enumerate(pairs) if port == _last_port), 0)
        for port in pairs[start:] + pairs[:start]:
            try:
                for candidate in (port, port + 1):
                    with socket.socket() as s:
                        s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            _last_port = port
            return port
        raise RuntimeError(f"no free port pair left in COMPACTWEB_TEST_PORTS={ports}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daphne(*, port: int, env: dict[str, str], log: Path, options: tuple[str, ...] = ()) -> subprocess.Popen:
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), *options,
             "compactweb.asgi:application"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            time.sleep(0.1)
    stop(process)
    raise RuntimeError(f"daphne did not listen on {port} within {START_TIMEOUT:g}s:\n{log.read_text()[-3000:]}")


def start_worker(
    *, queue: str, env: dict[str, str], log: Path, pool: str = "solo", concurrency: int | None = None
) -> subprocess.Popen:
    """A Celery worker on a private queue (other workers on the same Redis never take the test's tasks)."""
    extra = [] if concurrency is None else ["--concurrency", str(concurrency)]
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "compactweb", "worker", "--pool", pool, *extra, "-Q", queue,
             "-n", f"{queue}@%h", "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "info"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )


def start_scheduler(*, env: dict[str, str], log: Path, heartbeat: Path | None = None) -> subprocess.Popen:
    """The simulator scheduler as scripts/scale-out runs it (`manage.py simulate --scheduler`): with a broker in
    `env` it claims due steps and sends them as Celery tasks to the default queue."""
    extra = [] if heartbeat is None else ["--heartbeat-file", str(heartbeat)]
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "simulate", "--scheduler", *extra],
            env={**env, "PYTHONUNBUFFERED": "1"}, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )


def wait_for_log(process: subprocess.Popen, log: Path, text: str, *, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text():
            return
        if process.poll() is not None:
            raise RuntimeError(f"the process exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"'{text}' did not appear within {timeout:g}s:\n{log.read_text()[-3000:]}")


def forget_queue(client, queue: str) -> None:
    """Remove a private test queue from Redis: its list, kombu's bindings, and any message a killed worker left
    'unacked' for redelivery (so no later worker on this Redis ever sees it)."""
    client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    for tag, raw in client.hgetall("unacked").items():
        if queue.encode() in raw and json.loads(raw)[-1] == queue:
            client.hdel("unacked", tag)
            client.zrem("unacked_index", tag)


def stop(process: subprocess.Popen, *, sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait(timeout=10)


RUN_JOB_TASK = "sessions_app.jobs.tasks.run_job"


def send_compaction_job(broker, *, session_id: int, strategy: str = "local", queue: str | None = None) -> int:
    """A manual compaction as the dashboard hands it to a worker: a queued compaction job, then its task."""
    from sessions_app.models import Job

    job = Job.objects.create(kind=Job.Kind.COMPACTION, session_id=session_id,
                             params={"trigger": "manual", "strategy": strategy, "behind": ""})
    broker.send_task(RUN_JOB_TASK, kwargs={"job_id": job.pk}, **({"queue": queue} if queue else {}))
    return job.pk
