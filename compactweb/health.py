"""Health checks for load balancers and process supervisors.

`/healthz` answers without login (a load balancer has none) and says only which dependency is down, never where
it lives: database (it must take a write), channel layer, and the Celery broker when one is configured. 200 when all answer, else 503.
"""

from __future__ import annotations

import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.core import GaugeMetricFamily

from compactweb import db_outage, metrics
from compactweb.celery import app

OK = "ok"


def check_database() -> str:
    """A write probe (compactweb.db_outage.check_writable): a read-only or full SQLite file answers reads while
    every write fails, and a `SELECT 1` said "ok" while users got errors."""
    db_outage.check_writable()
    return OK


def check_channel_layer() -> str:
    layer = get_channel_layer()
    if layer is None:
        return "not configured"
    channel = async_to_sync(layer.new_channel)()
    marker = uuid.uuid4().hex
    async_to_sync(layer.send)(channel, {"type": "health.ping", "marker": marker})
    message = async_to_sync(layer.receive)(channel)
    if message.get("marker") != marker:
        raise RuntimeError("channel layer returned another message")
    return OK


def check_broker() -> str:
    if not settings.CELERY_BROKER_URL:
        return "not configured (tasks run in-process)"
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return OK


CHECKS = {"database": check_database, "channel_layer": check_channel_layer, "broker": check_broker}


def run_checks() -> tuple[bool, dict[str, str]]:
    results: dict[str, str] = {}
    healthy = True
    for name, check in CHECKS.items():
        try:
            results[name] = check()
        except Exception as exc:  # any failure is the answer, not an error of this view
            healthy = False
            results[name] = f"failing ({type(exc).__name__})"
    return healthy, results


@never_cache
@require_GET
def healthz(request):
    healthy, results = run_checks()
    return JsonResponse({"status": "ok" if healthy else "failing", "checks": results}, status=200 if healthy else 503)


def dependency_metrics():
    """The same checks as /healthz, as a gauge per dependency (1 up, 0 failing; one not configured is left out)."""
    family = GaugeMetricFamily(metrics.DEPENDENCY_UP, "Whether a dependency passes the /healthz check (1) or "
                               "fails it (0).", labels=["dependency"])
    for name, check in CHECKS.items():
        try:
            result = check()
        except Exception:  # a failing dependency is a value here, not an error of the scrape
            result = None
        if result is None or result == OK:
            family.add_metric([name], 0.0 if result is None else 1.0)
    yield family
