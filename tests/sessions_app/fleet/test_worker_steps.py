"""How a Celery worker runs simulator steps (issue 16): one event loop per process for every step, the step's
database calls on the task's own thread, and database connections kept from one task to the next."""

from __future__ import annotations

import threading

import pytest

from compactweb import celery as worker_app
from sessions_app.fleet import runtime as fleet

pytestmark = pytest.mark.django_db(transaction=True)


def test_steps_run_on_one_event_loop_with_their_database_calls_on_the_calling_thread(provider, policy, monkeypatch):
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy, loop=True)
    threads: list[threading.Thread] = []
    prepare = fleet._acquire_and_prepare

    def spy(session_id, now, claimed_at=None):
        threads.append(threading.current_thread())
        return prepare(session_id, now, claimed_at)

    loops = []
    real_step = fleet.arun_step

    async def step(**kwargs):
        import asyncio

        loops.append(asyncio.get_running_loop())
        return await real_step(**kwargs)

    monkeypatch.setattr(fleet, "_acquire_and_prepare", spy)
    monkeypatch.setattr(fleet, "arun_step", step)
    results = [fleet.do_run_step(session_id=runs[0].session_id) for _ in range(2)]

    assert [r.status for r in results] == ["ran", "ran"]
    assert loops[0] is loops[1] and loops[0].is_running()  # the same loop, still there for the next task
    assert threads == [threading.current_thread()] * 2


def test_a_worker_keeps_its_database_connections_health_checked_and_sqlite_keeps_its_own_settings():
    databases = {"default": {"ENGINE": "django.db.backends.postgresql", "CONN_MAX_AGE": 0,
                             "CONN_HEALTH_CHECKS": False},
                 "local": {"ENGINE": "django.db.backends.sqlite3", "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False}}
    worker_app.keep_worker_connections(databases)
    assert databases["default"]["CONN_MAX_AGE"] == worker_app.WORKER_CONN_MAX_AGE_SECONDS > 0
    # checked before a task's first query: a database restart breaks a kept connection without raising on it
    # (tests/scale_out/test_worker_connections_after_a_database_restart.py)
    assert databases["default"]["CONN_HEALTH_CHECKS"] is True
    assert databases["local"] == {"ENGINE": "django.db.backends.sqlite3", "CONN_MAX_AGE": 0,
                                  "CONN_HEALTH_CHECKS": False}


def test_a_worker_reuses_its_connections_across_tasks_and_closes_a_stale_one_before_a_task(settings):
    from types import SimpleNamespace

    from django.db import connection

    assert settings.CELERY_DB_REUSE_MAX > 0  # Celery's Django fixup then no longer closes them around every task
    connection.ensure_connection()
    eager = SimpleNamespace(request=SimpleNamespace(is_eager=True))
    worker_app.close_stale_connections(task=eager)
    assert connection.connection is not None  # an eager task leaves the caller's connection alone
    connection.close_at = 0  # outlived CONN_MAX_AGE
    worker_app.close_stale_connections(task=SimpleNamespace(request=SimpleNamespace(is_eager=False)))
    assert connection.connection is None
