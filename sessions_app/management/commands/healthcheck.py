"""Health check of one scale-out role, for process supervisors: exit 0 when healthy, 1 when not.

    manage.py healthcheck --role web        # database, channel layer, broker (the /healthz checks)
    manage.py healthcheck --role worker     # at least one Celery worker answers a ping
    manage.py healthcheck --role scheduler  # database and broker (what the scheduler needs to hand out steps)

Prints one line per check saying only which dependency is down, never where it lives (no URLs, no secrets).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from compactweb import health
from compactweb.celery import app

ROLES = ("web", "worker", "scheduler")
DEFAULT_PING_TIMEOUT = 2.0


def ping_workers(*, timeout: float) -> list[str]:
    """The names of the Celery workers that answered a ping within `timeout` seconds."""
    replies = app.control.ping(timeout=timeout) or []
    return sorted(name for reply in replies for name in reply)


def _check_workers(timeout: float) -> tuple[bool, dict[str, str]]:
    from django.conf import settings

    if not settings.CELERY_BROKER_URL:
        return False, {"workers": "no broker configured (CELERY_BROKER_URL): tasks run in-process, no workers"}
    try:
        answered = ping_workers(timeout=timeout)
    except Exception as exc:  # an unreachable broker is the answer, not a crash of the check
        return False, {"workers": f"failing ({type(exc).__name__})"}
    if not answered:
        return False, {"workers": f"no worker answered within {timeout:g}s"}
    return True, {"workers": f"{len(answered)} answered: {', '.join(answered)}"}


def _check(names: tuple[str, ...]) -> tuple[bool, dict[str, str]]:
    healthy, results = True, {}
    for name in names:
        try:
            results[name] = health.CHECKS[name]()
        except Exception as exc:
            healthy = False
            results[name] = f"failing ({type(exc).__name__})"
    return healthy, results


class Command(BaseCommand):
    help = "Check one scale-out role (web, worker or scheduler); exit status 1 when unhealthy."

    def add_arguments(self, parser):
        parser.add_argument("--role", required=True, choices=ROLES, help="The role to check.")
        parser.add_argument("--timeout", type=float, default=DEFAULT_PING_TIMEOUT,
                            help="Seconds to wait for workers to answer a ping (worker role).")

    def handle(self, *args, **opts):
        role = opts["role"]
        if opts["timeout"] <= 0:
            raise CommandError("--timeout must be a positive number of seconds")
        if role == "web":
            healthy, results = health.run_checks()
        elif role == "worker":
            healthy, results = _check_workers(opts["timeout"])
        else:
            healthy, results = _check(("database", "broker"))
        for name, result in results.items():
            self.stdout.write(f"{name}: {result}")
        self.stdout.write(f"{role}: {'ok' if healthy else 'failing'}")
        if not healthy:
            raise SystemExit(1)
