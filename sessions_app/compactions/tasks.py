"""Background jobs of the compaction app: scoring the retention of a session's compactions (compactweb.background).
A manual compaction is a job of sessions_app.jobs."""

from __future__ import annotations

from celery import shared_task
from django.db import transaction

from compactweb import background
from sessions_app.compactions.scoring import do_score_session


@shared_task(name="sessions_app.compactions.tasks.score_session_task")
def score_session_task(*, session_id: int) -> int:
    """Score the compactions of a session that have no retention score (sessions_app.compactions.scoring)."""
    return do_score_session(session_id=session_id)


def score_in_background(*, session_id: int) -> None:
    """Queue the scoring of a session's unscored compactions once the caller's transaction commits (an import or
    a followed file's new lines must not wait for it)."""
    transaction.on_commit(lambda: background.submit(score_session_task, session_id=session_id))
