"""`manage.py healthcheck --role web|worker|scheduler`: exit 0 when the role's dependencies answer, 1 when not,
saying which one is down."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from django.core.management import call_command

from tests.scale_out.processes import ROOT, child_env, forget_queue, start_worker, stop, wait_for_log


def run_healthcheck(*args: str, settings_broker: str | None, capsys, settings) -> tuple[int, str]:
    settings.CELERY_BROKER_URL = settings_broker
    try:
        call_command("healthcheck", *args)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code)
    return code, capsys.readouterr().out


@pytest.mark.django_db
def test_the_web_role_is_healthy_when_database_and_channel_layer_answer(capsys, settings):
    code, out = run_healthcheck("--role", "web", settings_broker=None, capsys=capsys, settings=settings)
    assert code == 0
    assert "database: ok" in out and "channel_layer: ok" in out and out.rstrip().endswith("web: ok")


@pytest.mark.django_db
def test_the_worker_role_fails_clearly_without_a_broker(capsys, settings):
    code, out = run_healthcheck("--role", "worker", settings_broker=None, capsys=capsys, settings=settings)
    assert code == 1
    assert "no broker configured (CELERY_BROKER_URL)" in out and out.rstrip().endswith("worker: failing")


@pytest.mark.django_db
def test_the_scheduler_role_checks_database_and_broker(capsys, settings):
    code, out = run_healthcheck("--role", "scheduler", settings_broker=None, capsys=capsys, settings=settings)
    assert code == 0
    assert out.splitlines() == ["database: ok", "broker: not configured (tasks run in-process)", "scheduler: ok"]


def test_an_unknown_role_is_refused():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="invalid choice: 'db'"):
        call_command("healthcheck", "--role", "db")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_worker_role_is_healthy_once_a_celery_worker_answers_a_ping(on_postgresql, redis_url, tmp_path):
    import redis

    queue = f"compactweb-test-{uuid.uuid4().hex[:8]}"
    env = child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path)
    log = tmp_path / "worker.log"
    worker = start_worker(queue=queue, env=env, log=log)
    try:
        wait_for_log(worker, log, "ready")
        checked = subprocess.run(
            [sys.executable, "manage.py", "healthcheck", "--role", "worker", "--timeout", "5"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
        )
    finally:
        stop(worker)
        forget_queue(redis.Redis.from_url(redis_url), queue)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{queue}@" in checked.stdout and checked.stdout.rstrip().endswith("worker: ok")
