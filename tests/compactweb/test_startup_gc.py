"""Long-running processes freeze what start-up built out of the cyclic collector (compactweb.startup_gc): the web
process once compactweb.asgi is loaded, a Celery worker process before its first task."""

from __future__ import annotations

import gc
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
