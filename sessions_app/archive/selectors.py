"""Which sessions retention may archive now, and where the archive files live."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db.models import Q

from sessions_app.models import Job, Session, SessionArchive, SimulatorRun
from sessions_app.transfer.importer import FOLLOWED, IMPORTING

# A session that ended: nothing runs it. Paused sessions (a person means to resume them) and running ones stay.
ENDED_STATES = (Session.State.IDLE, Session.State.STOPPED, Session.State.FAILED)


def archive_dir() -> Path:
    """The deployment's archive folder (COMPACTWEB_ARCHIVE_DIR, default <var dir>/archive)."""
    return Path(settings.COMPACTWEB_ARCHIVE_DIR)


def due_filter(*, cutoff: datetime, now: datetime) -> Q:
    """What makes a session due: no change since `cutoff` (its `updated_at` moves with every rollout line and
    every change of its row), ended, not held by a live lease, not being imported or followed from a file (its
    file may still grow), not behind a gateway session (its Codex CLI may come back), not the origin of a replay
    (the replay points at it), and no job or simulator run waiting on it."""
    return (
        Q(updated_at__lt=cutoff, state__in=ENDED_STATES)
        & (Q(lease_holder="") | Q(lease_expires_at__lt=now))
        & ~Q(source__in=(IMPORTING, FOLLOWED))
        & Q(gateway__isnull=True, replays__isnull=True)
        & ~Q(
            pk__in=Job.objects.filter(
                status__in=(Job.Status.QUEUED, Job.Status.RUNNING), session__isnull=False
            ).values("session_id")
        )
        & ~Q(
            pk__in=SimulatorRun.objects.filter(
                status__in=(SimulatorRun.Status.RUNNING, SimulatorRun.Status.PAUSED)
            ).values("session_id")
        )
    )


def due_session_ids(*, cutoff: datetime, now: datetime, limit: int) -> list[int]:
    """The ids of up to `limit` due sessions, the longest idle first."""
    return list(
        Session.objects.filter(due_filter(cutoff=cutoff, now=now))
        .order_by("updated_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def is_due(*, session_id: int, cutoff: datetime, now: datetime) -> bool:
    return Session.objects.filter(due_filter(cutoff=cutoff, now=now), pk=session_id).exists()


def list_archives(
    *, before: int | None = None, since: datetime | None = None, until: datetime | None = None, limit: int
) -> list:
    """Archive records newest first (archived_at, id): a keyset page of `limit` records older than record
    `before` (absent: the newest), archived at or after `since` and before `until`. A `before` that names no
    record gives an empty page."""
    rows = SessionArchive.objects.select_related("analytics_share")  # its restored_at, in the same query
    if since is not None:
        rows = rows.filter(archived_at__gte=since)
    if until is not None:
        rows = rows.filter(archived_at__lt=until)
    if before is not None:
        anchor = SessionArchive.objects.filter(pk=before).values_list("archived_at", flat=True).first()
        if anchor is None:
            return []
        # The plain `archived_at <= anchor` is what the index range starts from (PostgreSQL does not use the OR
        # as an index condition: without it a page half a year back filtered every newer row).
        rows = rows.filter(
            Q(archived_at__lte=anchor), Q(archived_at__lt=anchor) | Q(archived_at=anchor, pk__lt=before)
        )
    return list(rows.order_by("-archived_at", "-pk")[:limit])
