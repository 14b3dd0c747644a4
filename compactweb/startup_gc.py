"""What a long-running process built at start-up, moved out of the cyclic garbage collector's reach.

Modules, URL and template caches, the apps and everything else start-up builds live as long as the process. Left
to the collector, every full collection walks all of them again: in the web process under the live events bench
that took 220-290 ms every ~7 s, stalling every request and websocket send at once, so the events' p99 was 3x
their p50 (docs/benchmarks.md, "Round five"). `gc.freeze()` puts what exists now into a permanent generation that
collections skip; only what is built later is walked. Call it once start-up is over: the web process at the end
of compactweb.asgi, a Celery worker process before its first task.
"""

from __future__ import annotations

import gc


def freeze_startup_objects(**signal_kwargs) -> None:
    """Freeze every object that exists now out of the cyclic collector (a signal receiver too: kwargs ignored)."""
    gc.freeze()
