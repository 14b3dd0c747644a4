"""compactweb, the project package.

The Celery app (compactweb.celery) is not imported here, as Django's Celery layout usually does, but by the first
app's ready() (sessions_app.apps), which every Django process runs before it sends a task, and by `celery -A
compactweb`, which finds compactweb.celery itself. The set's plain-Python helpers (`python -m compactweb.orphans`,
`compactweb.set_database`, `compactweb.set_start`) import this package first: with the app here each of them paid
Celery's and kombu's imports, about 0.7 s of CPU and 12-23 s at load 18, on the cold start's path (issue 42).
"""


def __getattr__(name: str):
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ("celery_app",)
