"""Background jobs of the compaction app: a manual compaction queued from the UI (compactweb.background)."""

from __future__ import annotations

import logging
import uuid

from celery import shared_task
from django.contrib.auth import get_user_model
from django.db import transaction

from compactweb import background
from sessions_app.compactions.queue_runner import run_queued
from sessions_app.compactions.scoring import do_score_session
from sessions_app.compactions.services import (
    CompactionFailed,
    CompactionInterrupted,
    CompactionRefused,
    do_compact_session,
    lease_is_free,
)
from sessions_app.models import Session
from sessions_app.rollout.lease import LeaseLost, SessionBusy

logger = logging.getLogger(__name__)


@shared_task(name="sessions_app.compactions.tasks.run_compaction_task")
def run_compaction_task(
    *, session_id: int, actor_id: int | None = None, strategy: str | None = None, instructions: str = "",
    request_id: str = "",
) -> int | None:
    """Run a manual compaction; returns the Compaction id, or None when it did not install anything.

    Every outcome is already recorded (attempt row, rollout error line, audit entry, live events), so failures are
    logged here, not raised: a retry by the queue would compact twice.
    """
    actor = get_user_model().objects.filter(pk=actor_id).first() if actor_id is not None else None
    try:
        compaction = do_compact_session(
            session_id=session_id, actor=actor, trigger="manual", strategy=strategy, instructions=instructions
        )
    except (SessionBusy, LeaseLost, CompactionRefused, CompactionInterrupted, CompactionFailed,
            Session.DoesNotExist) as exc:
        logger.info("compaction %s of session %s did not install: %s", request_id, session_id, exc)
        return None
    return compaction.pk


def start_compaction(
    *, session_id: int, actor_id: int | None, strategy: str | None = None, instructions: str = ""
) -> None:
    """Queue a manual compaction and return at once (progress arrives as live events). Raises SessionBusy now
    when the session is held, so the caller can say so; the job itself re-checks when it takes the lease."""
    lease_is_free(session_id=session_id)
    background.submit(
        run_compaction_task, session_id=session_id, actor_id=actor_id, strategy=strategy,
        instructions=instructions, request_id=uuid.uuid4().hex,
    )


@shared_task(name="sessions_app.compactions.tasks.run_queued_compaction_task")
def run_queued_compaction_task(*, queued_id: int) -> int | None:
    """Run a manual compaction that was queued behind a turn, once the turn releases the session
    (sessions_app.compactions.queue_runner.run_queued); returns the Compaction id or None."""
    return run_queued(queued_id=queued_id)


@shared_task(name="sessions_app.compactions.tasks.score_session_task")
def score_session_task(*, session_id: int) -> int:
    """Score the compactions of a session that have no retention score (sessions_app.compactions.scoring)."""
    return do_score_session(session_id=session_id)


def score_in_background(*, session_id: int) -> None:
    """Queue the scoring of a session's unscored compactions once the caller's transaction commits (an import or
    a followed file's new lines must not wait for it)."""
    transaction.on_commit(lambda: background.submit(score_session_task, session_id=session_id))
