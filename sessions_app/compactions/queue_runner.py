"""The job side of a queued manual compaction (sessions_app.compactions.queue is the request side): wait until the
turn holding the session releases it, then compact under the lease this job took, or give up after WAIT_SECONDS
and say so with a live event."""

from __future__ import annotations

import logging
import time

from django.utils import timezone

from sessions_app.compactions.services import (
    CompactionFailed,
    CompactionInterrupted,
    CompactionRefused,
    do_compact_session,
)
from sessions_app.models import QueuedCompaction, Session
from sessions_app.rollout.events import publish_transient
from sessions_app.rollout.lease import Lease, LeaseLost, SessionBusy, acquire, release

logger = logging.getLogger(__name__)

QUEUED_EVENT = "compaction.queued"
EXPIRED_EVENT = "compaction.queue_expired"
COMPACTION_PURPOSE = "compaction"
WAIT_SECONDS = 600.0  # a queued compaction gives up when the session stays held this long
POLL_SECONDS = 0.25


def wait_for_lease(*, queued_id: int, wait_seconds: float = WAIT_SECONDS, poll_seconds: float = POLL_SECONDS,
                   clock=time.monotonic, sleep=time.sleep) -> Lease | None:
    """Wait until the turn holding the session of a queued compaction releases it, and take the session's lease
    for the compaction. None when the request no longer waits (started or expired already), its session is gone,
    or the session stayed held for `wait_seconds` (the request then expires and a live event says so)."""
    queued = QueuedCompaction.objects.filter(pk=queued_id).first()
    if queued is None or queued.status != QueuedCompaction.Status.QUEUED:
        return None
    deadline = clock() + wait_seconds
    while True:
        try:
            return acquire(session_id=queued.session_id, purpose=COMPACTION_PURPOSE)
        except Session.DoesNotExist:
            return None
        except SessionBusy:
            if clock() >= deadline:
                _expire(queued)
                return None
            sleep(poll_seconds)


def mark_started(*, queued_id: int) -> bool:
    """The queued request leaves the queue (simulator steps of its session go on after it); False when it had
    left already."""
    return bool(QueuedCompaction.objects.filter(pk=queued_id, status=QueuedCompaction.Status.QUEUED).update(
        status=QueuedCompaction.Status.STARTED, started_at=timezone.now()
    ))


def run_queued(*, queued_id: int, wait_seconds: float = WAIT_SECONDS, poll_seconds: float = POLL_SECONDS,
               clock=time.monotonic, sleep=time.sleep) -> int | None:
    """Wait until the session is free, then run the queued compaction (the background job). Returns the installed
    Compaction id, or None (it failed, which its attempt records, or it expired waiting)."""
    lease = wait_for_lease(queued_id=queued_id, wait_seconds=wait_seconds, poll_seconds=poll_seconds, clock=clock,
                           sleep=sleep)
    if lease is None:
        return None
    try:
        if not mark_started(queued_id=queued_id):
            return None
        queued = QueuedCompaction.objects.select_related("requested_by").get(pk=queued_id)
        compaction = do_compact_session(
            session_id=queued.session_id, actor=queued.requested_by, trigger="manual",
            strategy=queued.strategy or None, instructions=queued.instructions, lease=lease,
        )
    except (LeaseLost, CompactionRefused, CompactionInterrupted, CompactionFailed, Session.DoesNotExist) as exc:
        logger.info("queued compaction %s did not install: %s", queued_id, exc)
        return None
    finally:
        release(lease)
    return compaction.pk


def expire(*, queued_id: int) -> None:
    """The request leaves the queue unrun (its waiting process died, say); nothing when it had left already."""
    queued = QueuedCompaction.objects.filter(pk=queued_id).first()
    if queued is not None:
        _expire(queued)


def _expire(queued: QueuedCompaction) -> None:
    QueuedCompaction.objects.filter(pk=queued.pk, status=QueuedCompaction.Status.QUEUED).update(
        status=QueuedCompaction.Status.EXPIRED
    )
    after_seq = Session.objects.filter(pk=queued.session_id).values_list("last_seq", flat=True).first() or 0
    publish_transient(session_id=queued.session_id, after_seq=after_seq, kind=EXPIRED_EVENT,
                      detail={"queued_id": queued.pk, "message": "the session stayed busy; the queued compaction "
                                                                  "was dropped"})
