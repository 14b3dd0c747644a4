"""Long-running processes freeze what start-up built out of the cyclic collector (compactweb.startup_gc): the web
process once compactweb.asgi is loaded, a Celery worker process before its first task."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

from celery.signals import worker_process_init

from compactweb.startup_gc import freeze_startup_objects

ROOT = Path(__file__).resolve().parents[2]


def test_loading_the_asgi_application_freezes_what_start_up_built():
    # A fresh interpreter: this test process has imported the app long ago and may have frozen already.
    code = ("import gc; assert gc.get_freeze_count() == 0; import compactweb.asgi; "
            "print(gc.get_freeze_count())")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True)
    assert int(done.stdout.strip().splitlines()[-1]) > 10_000  # the modules and apps, not a handful of objects


def test_a_worker_process_freezes_before_its_first_task():
    import compactweb.celery  # noqa: F401  (connects the worker signals)

    receivers = [receiver() if isinstance(receiver, weakref.ReferenceType) else receiver
                 for _key, receiver in worker_process_init.receivers]
    assert freeze_startup_objects in receivers


def test_freezing_moves_every_existing_object_out_of_the_collector():
    before = gc.get_freeze_count()
    made = [object() for _ in range(10)], {"a": [1]}
    freeze_startup_objects(sender=None)
    try:
        assert gc.get_freeze_count() >= before + 2 and made
    finally:
        gc.unfreeze()  # give this test process its objects back


GC_NOW = "import gc; print(gc.isenabled(), gc.get_freeze_count() > 10_000)"
# Reports how many full collections had run when Django's apps were ready (the pause's end). One may run after it,
# once later imports fill the young generations: it walks only what was built since the freeze, and whether it
# runs depends on how many objects those imports allocate (bytecode cached or compiled), not on the pause.
AT_READY = ("import gc, compactweb.startup_gc as s; end = s.end_startup_pause; "
            "s.end_startup_pause = lambda *a, **k: (print('full', gc.get_stats()[2]['collections']), end(*a, **k))[1]; ")


def _gc_after_start(code: str) -> list[str]:
    """The full collections run before Django's apps were ready, then whether the collector runs and start-up's
    objects are frozen, in a fresh process running `code` after AT_READY."""
    done = subprocess.run([sys.executable, "-c", AT_READY + code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True, env={**os.environ, "DJANGO_SETTINGS_MODULE": "compactweb.settings"})
    lines = done.stdout.strip().splitlines()
    return [line for line in lines if line.startswith("full ")] + lines[-1:]


def test_a_manage_py_process_runs_no_full_collection_while_it_starts_and_collects_again_once_ready():
    # Before the pause: two full collections (and 250-odd in all) while Django's apps and their imports loaded.
    code = f"import runpy, sys; sys.argv = ['manage.py', 'shell', '-c', {GC_NOW!r}]; runpy.run_path('manage.py', run_name='__main__')"
    assert _gc_after_start(code) == ["full 0", "True True"]


def test_a_web_process_runs_no_full_collection_while_it_starts_and_collects_again_once_ready():
    assert _gc_after_start(f"import compactweb.asgi; {GC_NOW}") == ["full 0", "True True"]


def test_a_process_that_did_not_pause_the_collector_keeps_it_as_it_was():
    code = ("import gc, django; gc.disable(); django.setup(); print(gc.isenabled(), gc.get_freeze_count()); "
            "gc.enable(); import compactweb.startup_gc as s; s.pause_collector(); s.end_startup_pause(); "
            "print(gc.isenabled(), gc.get_freeze_count() > 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True, env={**os.environ, "DJANGO_SETTINGS_MODULE": "compactweb.settings"})
    assert done.stdout.split() == ["False", "0", "True", "True"]
