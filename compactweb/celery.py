"""The Celery app. With no CELERY_BROKER_URL, tasks run eagerly in-process (the embedded default)."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")


def keep_workers_alive_when_redis_restarts() -> None:
    """Let a worker survive its Redis broker going away while a task runs (kombu 5.7's Redis channel).

    On a lost connection Celery closes the channel twice: once while collecting the connection, then again after
    detaching the transport. The first close reads the BRPOP still pending on the dead socket, fails on it and
    leaves the channel open; the second then tries to requeue the running (acks_late) tasks through the detached
    transport and raises AttributeError, which Celery treats as unrecoverable: the worker exits instead of
    reconnecting. Closing again right after the failed read (the read clears the pending BRPOP) finishes the
    first close while the transport is still attached. Idempotent."""
    from kombu.transport import redis as kombu_redis

    close = kombu_redis.Channel.close
    if getattr(close, "survives_a_failed_pending_read", False):
        return
    connection_errors = kombu_redis.get_redis_error_classes().connection_errors

    def close_past_a_failed_pending_read(channel) -> None:
        try:
            close(channel)
        except connection_errors:
            if channel.closed:
                raise
            close(channel)

    close_past_a_failed_pending_read.survives_a_failed_pending_read = True
    kombu_redis.Channel.close = close_past_a_failed_pending_read


keep_workers_alive_when_redis_restarts()

# A worker keeps its database connection from one task to the next (settings.CELERY_DB_REUSE_MAX stops Celery's
# Django fixup from closing it around every task); before each task, one that an error left unusable or that is
# older than this is closed (`close_stale_connections`). The web processes keep CONN_MAX_AGE 0 (settings), and
# only their request threads keep a connection (compactweb.request_threads); a prefork worker runs one task at a
# time on one thread, and a fresh PostgreSQL connection per simulator step cost a server backend with cold catalog
# caches every time (docs/benchmarks.md, "Scale-out load").
WORKER_CONN_MAX_AGE_SECONDS = float(os.environ.get("COMPACTWEB_WORKER_CONN_MAX_AGE", "300"))


def keep_worker_connections(databases: dict | None = None, **signal_kwargs) -> None:
    """Give every database of this worker process (settings.DATABASES unless given) CONN_MAX_AGE =
    WORKER_CONN_MAX_AGE_SECONDS and Django's CONN_HEALTH_CHECKS (worker_init: in the main worker process, before
    the prefork children fork, so they inherit it). SQLite keeps its own settings.

    The health check is what makes a kept connection safe after a database restart (issue 42): the restart breaks
    it without an error being raised on it, so `close_if_unusable_or_obsolete` keeps it, and each worker process's
    first task then failed on it and took the outage path. With the check, a task's first query on a kept
    connection is preceded by one `SELECT 1` (once per task: `close_stale_connections` re-arms it), and a broken
    connection is replaced before the task uses it."""
    if databases is None:
        from django.conf import settings

        databases = settings.DATABASES
    for database in databases.values():
        if database.get("ENGINE", "").endswith("sqlite3"):
            continue
        database["CONN_MAX_AGE"] = WORKER_CONN_MAX_AGE_SECONDS
        database["CONN_HEALTH_CHECKS"] = True


app = Celery("compactweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["sessions_app.compactions", "sessions_app.fleet", "sessions_app.jobs", "sessions_app.archive"])


def close_stale_connections(task=None, **signal_kwargs) -> None:
    """Before a task a worker runs (task_prerun): close a kept connection that an error left unusable or that
    outlived CONN_MAX_AGE, as Django does around a request; the task then opens a fresh one. It also re-arms the
    connection's health check (`keep_worker_connections`), which the task's first query runs. A task run eagerly
    (no broker: in the caller's thread, maybe inside its transaction) leaves the caller's connection alone."""
    from django.db import connections

    if task is None or getattr(task.request, "is_eager", False):
        return
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()


def _connect_worker_signals() -> None:
    from celery.signals import (
        task_postrun,
        task_prerun,
        worker_init,
        worker_process_init,
        worker_ready,
        worker_shutting_down,
    )

    from compactweb import set_start, worker_affinity, worker_priority
    from compactweb.startup_gc import freeze_startup_objects

    worker_init.connect(keep_worker_connections, weak=False, dispatch_uid="compactweb-keep-worker-connections")
    # In each worker process (a prefork child after its fork, or a solo/threads worker), before its first task.
    worker_process_init.connect(freeze_startup_objects, weak=False, dispatch_uid="compactweb-freeze-startup-objects")
    task_prerun.connect(close_stale_connections, weak=False, dispatch_uid="compactweb-close-stale-connections")
    # In the main worker process: its heartbeat, so the dispatcher sends it its sessions' steps (issue 34).
    worker_ready.connect(worker_affinity.start_heartbeat, weak=False, dispatch_uid="compactweb-worker-heartbeat")
    # Started at its given priority; the main process lowered once ready, each pool process after its first task
    # (COMPACTWEB_WORKER_NICE, scripts/scale-out --worker-nice).
    worker_init.connect(worker_priority.remember_start_priority, weak=False,
                        dispatch_uid="compactweb-worker-start-priority")
    worker_ready.connect(worker_priority.lower_when_ready, weak=False, dispatch_uid="compactweb-worker-priority")
    task_postrun.connect(worker_priority.lower_after_first_task, weak=False,
                         dispatch_uid="compactweb-worker-priority-after-first-task")
    # In a scale-out set: the web processes and the watchdog start once a worker is ready (compactweb.set_start).
    worker_ready.connect(set_start.announce_worker_ready, weak=False, dispatch_uid="compactweb-set-start")
    worker_shutting_down.connect(worker_affinity.stop_heartbeat, weak=False,
                                 dispatch_uid="compactweb-worker-heartbeat-stop")


_connect_worker_signals()
