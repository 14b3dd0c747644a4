"""What a long-running process built at start-up, moved out of the cyclic garbage collector's reach.

Modules, URL and template caches, the apps and everything else start-up builds live as long as the process. Left
to the collector, every full collection walks all of them again: in the web process under the live events bench
that took 220-290 ms every ~7 s, stalling every request and websocket send at once, so the events' p99 was 3x
their p50 (docs/benchmarks.md, "Round five"). `gc.freeze()` puts what exists now into a permanent generation that
collections skip; only what is built later is walked. Call it once start-up is over: the web process at the end
of compactweb.asgi, a Celery worker process before its first task.

Before that, while a process starts, the collector does not run at all (issue 42): importing the app's ~1,300
modules set off 250-odd collections, two of them full, 0.18-0.19 s of the 1.0-1.1 s of CPU that `django.setup()`
and a worker's imports took, walking objects that all live on. The entry points (manage.py, compactweb.asgi and
compactweb.celery_worker) call `pause_collector` first; Django's apps being ready (sessions_app's `ready()`) ends
the pause: what exists then is frozen and the collector runs again. A process that did not pause it (a test run,
a shell that imports the app) is left as it was.
"""

from __future__ import annotations

import gc

_paused = False  # whether this process's collector is off because `pause_collector` turned it off


def freeze_startup_objects(**signal_kwargs) -> None:
    """Freeze every object that exists now out of the cyclic collector (a signal receiver too: kwargs ignored)."""
    gc.freeze()


def pause_collector() -> None:
    """At a process's entry point, before its imports: no cyclic collection until `end_startup_pause`."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def end_startup_pause() -> None:
    """Django's apps are ready: freeze what start-up built and let the collector run again, if
    `pause_collector` stopped it (otherwise nothing)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
