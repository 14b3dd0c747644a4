"""Running retention on a schedule (issue 34): a Celery task (Celery beat's `archive-ended-sessions` entry sends it,
compactweb/settings.CELERY_BEAT_SCHEDULE) and the scheduler's housekeeping (sessions_app.fleet.scheduler, in the
dashboard on the embedded default or `manage.py simulate --scheduler`), which hands the same task to a worker or
the in-process pool when a run is due. Whoever starts a run first claims it with one conditional UPDATE of the
settings row, so beat, several schedulers and the pool never run it twice for one period."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from celery import shared_task
from django.db.models import Q
from django.utils import timezone

from compaction_app.models import RetentionSettings
from compactweb import background
from sessions_app.archive import services

# The housekeeping round comes every 2 s; the settings row is read at most this often per process.
CHECK_EVERY_SECONDS = 60.0
_checked = {"at": float("-inf")}
_check_lock = threading.Lock()


def claim_run(*, now: datetime) -> bool:
    """Take this period's run when retention is enabled and the last run started `run_every_hours` ago or more
    (or never): one conditional UPDATE, true for exactly one caller."""
    row = RetentionSettings.current()
    if not row.enabled:
        return False
    due_before = now - timedelta(hours=row.run_every_hours)
    return (
        RetentionSettings.objects.filter(pk=row.pk, enabled=True)
        .filter(Q(last_run_at__isnull=True) | Q(last_run_at__lte=due_before))
        .update(last_run_at=now)
        == 1
    )


@shared_task(name="sessions_app.archive.tasks.run_scheduled_archiver", ignore_result=True)
def run_scheduled_archiver() -> int | None:
    """Run the retention policy if this period's run is ours to claim; returns the ArchiveRun id, or None."""
    now = timezone.now()
    if not claim_run(now=now):
        return None
    return services.do_run_archiver(trigger=services.SCHEDULER, now=None).pk


def archive_if_due(sender=None, *, clock=time.monotonic, **kwargs) -> bool:
    """housekeeping_done receiver: at most once a minute, hand the archiver task to a worker (or the in-process
    pool) when retention is enabled and a run is due. The task claims the run itself. Returns whether it did."""
    with _check_lock:
        if clock() - _checked["at"] < CHECK_EVERY_SECONDS:
            return False
        _checked["at"] = clock()
    row = RetentionSettings.objects.filter(pk=1).values("enabled", "last_run_at", "run_every_hours").first()
    if row is None or not row["enabled"]:
        return False
    last = row["last_run_at"]
    if last is not None and timezone.now() - last < timedelta(hours=row["run_every_hours"]):
        return False
    background.submit(run_scheduled_archiver)
    return True
