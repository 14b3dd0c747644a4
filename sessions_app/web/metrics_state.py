"""The shared state /metrics reads at each scrape (compactweb.metrics, "state"): alerts open and raised by kind,
jobs waiting and running, the workers' and the scheduler's heartbeats. Read from the database, the broker's Redis and
the scheduler's heartbeat file, so every web process answers the same and a process that died leaves nothing stale.
Registered by sessions_app's ready()."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Min, Sum
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from compaction_app.engine.alerts import AlertKind
from compaction_app.models import Alert
from compactweb import metrics, worker_affinity
from sessions_app.compactions.alerts import open_alerts
from sessions_app.models import Job

WAITING = (Job.Status.QUEUED, Job.Status.RUNNING)


def alert_metrics() -> Iterator[Metric]:
    opened = GaugeMetricFamily(metrics.ALERTS_OPEN, "Alerts open (not acknowledged, snoozed or silenced), by "
                               "kind.", labels=["kind"])
    raised = CounterMetricFamily(metrics.ALERTS_RAISED, "Alerts raised, by kind, each repeat of an open cause "
                                 "counted (the alerts of sessions retention removed leave the count).",
                                 labels=["kind"])
    open_by_kind = dict(open_alerts().values_list("kind")
                        .annotate(n=Count("pk")).values_list("kind", "n"))
    raised_by_kind = dict(Alert.objects.values_list("kind").annotate(n=Sum("count")).values_list("kind", "n"))
    for kind in AlertKind:
        opened.add_metric([kind.value], open_by_kind.get(kind.value, 0))
        raised.add_metric([kind.value], raised_by_kind.get(kind.value) or 0)
    yield opened
    yield raised


def job_metrics() -> Iterator[Metric]:
    jobs = GaugeMetricFamily(metrics.JOBS, "Jobs (manual compactions, replays, imports) queued or running, by kind "
                             "and status.", labels=["kind", "status"])
    counts = {(kind, status): n for kind, status, n in Job.objects.filter(status__in=WAITING)
              .values_list("kind", "status").annotate(n=Count("pk")).values_list("kind", "status", "n")}
    for kind in Job.Kind.values:
        for status in WAITING:
            jobs.add_metric([kind, status.value], counts.get((kind, status.value), 0))
    yield jobs
    oldest = Job.objects.filter(status=Job.Status.QUEUED).aggregate(at=Min("created_at"))["at"]
    yield GaugeMetricFamily(metrics.JOB_OLDEST_QUEUED, "Age of the oldest queued job (0 when none waits).",
                            value=(timezone.now() - oldest).total_seconds() if oldest else 0.0)


def heartbeat_metrics() -> Iterator[Metric]:
    if worker_affinity.enabled():
        try:
            alive = len(worker_affinity.Registry().live())
        except Exception:  # the broker's Redis is down: compactweb_dependency_up says so; no worker count
            alive = None
        if alive is not None:
            yield GaugeMetricFamily(metrics.WORKERS_ALIVE, "Celery workers whose heartbeat in the broker's Redis "
                                    "has not expired.", value=alive)
    path = settings.COMPACTWEB_SCHEDULER_HEARTBEAT_FILE
    if path:
        try:
            age = max(time.time() - os.stat(path).st_mtime, 0.0)
        except OSError:  # never beaten yet (or the file is gone): as old as can be
            age = float("inf")
        yield GaugeMetricFamily(metrics.SCHEDULER_HEARTBEAT_AGE, "Seconds since the simulator scheduler last "
                                "completed a round (its heartbeat file).", value=age)


def state_metrics() -> Iterator[Metric]:
    yield from alert_metrics()
    yield from job_metrics()
    yield from heartbeat_metrics()
