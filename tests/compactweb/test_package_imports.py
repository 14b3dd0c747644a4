"""What importing the compactweb package costs (issue 42): the set's plain-Python helpers, which the launcher runs on
a cold start's path, import no Celery (it was 0.7 s of CPU each, 12-23 s at load 18); a Django process still has
the project's Celery app as the current one once Django is set up, so a task it sends goes to the configured
broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_sets_helpers_import_no_celery_and_no_django():
    out = run_python("import sys, compactweb.orphans, compactweb.set_start, compactweb.set_database, "
                     "compactweb.worker_priority; "
                     "print(sorted({m.split('.')[0] for m in sys.modules} & {'celery', 'kombu', 'django'}))")
    assert out == "[]"


def test_a_django_process_has_the_projects_celery_app_as_current_after_setup():
    out = run_python("import django; django.setup(); from celery import current_app; "
                     "print(current_app.main, current_app.conf.broker_url)",
                     DJANGO_SETTINGS_MODULE="compactweb.settings", CELERY_BROKER_URL="redis://127.0.0.1:1/9")
    assert out == "compactweb redis://127.0.0.1:1/9"


def test_the_package_still_offers_its_celery_app():
    out = run_python("import compactweb; print(compactweb.celery_app.main)",
                     DJANGO_SETTINGS_MODULE="compactweb.settings")
    assert out == "compactweb"


def test_a_workers_django_start_imports_neither_the_apis_views_nor_httpxs_command_line():
    """DRF's response and views (its serializers, requests, drf-spectacular, django.test) and httpx's command-line
    tool (click, rich, pygments) were about 0.15 s of CPU of every worker's and scheduler's start (issue 42)."""
    out = run_python("import sys, django; django.setup(); import compactweb.celery, sessions_app.fleet.tasks; "
                     "print([m for m in ('rest_framework.response', 'rest_framework.views', 'drf_spectacular.plumbing', "
                     "'requests', 'httpx._main', 'rich', 'pygments') if sys.modules.get(m) is not None], "
                     "'httpx' in sys.modules)",
                     DJANGO_SETTINGS_MODULE="compactweb.settings")
    assert out == "[] True"
