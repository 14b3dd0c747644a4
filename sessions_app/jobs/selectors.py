"""Reads of jobs for the pages."""

from __future__ import annotations

from django.db.models import QuerySet

from sessions_app.models import Job

RECENT_JOBS = 10


def replay_jobs(*, session_id: int) -> QuerySet[Job]:
    """The session's replay jobs still waiting, running, or failed, newest first (a succeeded one is shown as its
    comparison instead)."""
    return (Job.objects.filter(session_id=session_id, kind=Job.Kind.REPLAY)
            .exclude(status=Job.Status.SUCCEEDED).order_by("-pk")[:RECENT_JOBS])
