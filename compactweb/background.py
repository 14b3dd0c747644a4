"""Run work off the request path: on a Celery worker when a broker is configured, else in this process.

The embedded default has no broker: work runs on a small thread pool inside the dashboard process (each job closes
its database connections when done). With CELERY_BROKER_URL set, the same job is sent as a Celery task so any
worker can take it. Callers name a registered Celery task; its function is what runs in-process too.
"""

from __future__ import annotations

import atexit
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
POOL_SIZE = 4


def uses_broker() -> bool:
    return bool(settings.CELERY_BROKER_URL)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="compactweb-bg")
            # On exit, queued jobs are dropped (a manual compaction not started leaves the history as it was).
            atexit.register(_pool.shutdown, wait=False, cancel_futures=True)
        return _pool


def _run_in_thread(task, kwargs: dict[str, Any]) -> None:
    close_old_connections()
    try:
        task.run(**kwargs)
    except Exception:
        logger.exception("background job %s failed", task.name)
    finally:
        close_old_connections()


def submit(task, **kwargs: Any) -> Future | None:
    """Queue `task` (a Celery task object) with keyword arguments; returns a Future in embedded mode."""
    if uses_broker():
        task.apply_async(kwargs=kwargs)
        return None
    return _executor().submit(_run_in_thread, task, kwargs)
