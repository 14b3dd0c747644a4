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
