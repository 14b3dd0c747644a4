"""compactweb, the project package.

The Celery app (compactweb.celery) is not imported here, as Django's Celery layout usually does, but by the first
app's ready() (sessions_app.apps), which every Django process runs before it sends a task, and by `celery -A
compactweb`, which finds compactweb.celery itself. The set's plain-Python helpers (`python -m compactweb.orphans`,
`compactweb.set_database`, `compactweb.set_start`) import this package first: with the app here each of them paid
Celery's and kombu's imports, about 0.7 s of CPU and 12-23 s at load 18, on the cold start's path (issue 42).

httpx imports its command-line tool (`httpx._main`: click, rich and pygments) whenever those are installed, as the
development virtualenv has them; no process of compactweb runs that tool, and every one that imports httpx (a
worker, the scheduler, a web process) paid about 0.05 s of CPU for it, seconds of a cold start on a saturated host
(issue 42). Marking the module as absent makes httpx fall back to its stub `main`, as it does where those packages
are not installed; the `httpx` command itself runs in a process of its own and is unaffected.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def __getattr__(name: str):
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ("celery_app",)
