"""Manual compactions the operator asks for, started at once or queued behind the turn that holds the session.

`request_manual_compaction` is the UI's entry point (the API's is sessions_app.jobs.tasks.do_queue_compaction_job,
which queues the same way and runs the request as a job to poll): when the session is free
the compaction starts in the background at once; when a turn holds it (a simulator step, an API turn), the request
is stored as a QueuedCompaction and a background job starts it as soon as that turn releases the session. Meanwhile
simulator steps of the session wait (`has_queued`), so the queued compaction cannot be starved by the next step.
Live events say what happens: `compaction.queued` (transient), then the compaction's own progress and result.
A second compaction is never queued beside a running or queued one: that request is refused with the reason.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from compactweb import background, statements
from sessions_app.compactions.queue_runner import (
    COMPACTION_PURPOSE,
    EXPIRED_EVENT,
    QUEUED_EVENT,
    WAIT_SECONDS,
)
from sessions_app.compactions.services import lease_is_free
from sessions_app.compactions.tasks import run_queued_compaction_task, start_compaction
from sessions_app.models import QueuedCompaction, Session
from sessions_app.rollout.events import publish_transient
from sessions_app.rollout.lease import SessionBusy

logger = logging.getLogger(__name__)

LOCAL_ONLY_MESSAGE = (
    "Extra instructions apply to local summarisation only: remote and new-window compaction send no prompt."
)


class CompactionRequestRefused(ValueError):
    """The request cannot be started or queued; nothing changed. `status` is the HTTP status that fits."""

    def __init__(self, message: str, *, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class CompactionRequestOutcome:
    queued: bool
    message: str
    queued_id: int | None = None


def _waiting(*, session_id: int):
    """The session's requests still waiting. One older than WAIT_SECONDS has no live waiter (its waiter gives up
    then; one whose process died, or a dashboard restarted with the request in its in-process pool, never marks
    it): it no longer holds simulator steps back, nor blocks a new request."""
    return QueuedCompaction.objects.filter(session_id=session_id, status=QueuedCompaction.Status.QUEUED,
                                           created_at__gte=_fresh_since())


def _fresh_since() -> datetime:
    """The oldest creation time of a request that still has a live waiter (see `_waiting`)."""
    return timezone.now() - timedelta(seconds=WAIT_SECONDS)


def has_queued(*, session_id: int) -> bool:
    """Whether a compaction request waits for the session (`_waiting` exists). Every simulator step asks before it
    takes the session, so this is `_waiting`'s filter as a statement written once (compactweb.statements): the ORM
    built the same `exists()` in about five times the time the query took."""
    return _QUEUED.exists(where=(session_id, QueuedCompaction.Status.QUEUED.value, _fresh_since()))


_QUEUED = statements.Select(QueuedCompaction, columns=(), where=("session", "status", "created_at__gte"))


def queued_for(*, session_id: int) -> dict | None:
    """The session's waiting compaction request, for the status box (None when there is none)."""
    return _waiting(session_id=session_id).order_by("pk").values("id", "strategy", "behind", "created_at").first()


def holder_to_queue_behind(*, session_id: int) -> str | None:
    """What a manual compaction asked for now waits behind: None when the session is free, else the purpose of the
    turn (a simulator step, an API turn, a rollback) holding it. Refused (CompactionRequestRefused) when the session
    does not exist, or when another compaction runs or waits already: a second one is never queued beside it."""
    if has_queued(session_id=session_id):
        raise CompactionRequestRefused("A manual compaction is already queued for this session; it runs when the "
                                       "current step ends.")
    try:
        lease_is_free(session_id=session_id)
    except Session.DoesNotExist:
        raise CompactionRequestRefused(f"Session {session_id} does not exist.", status=404) from None
    except SessionBusy as exc:
        if exc.purpose == COMPACTION_PURPOSE:
            raise CompactionRequestRefused("A compaction of this session is running already; wait for its result."
                                           ) from None
        return exc.purpose
    return None


def queue_behind(*, session_id: int, actor, behind: str, strategy: str | None = None,
                 instructions: str = "") -> QueuedCompaction:
    """Store the request (simulator steps of the session wait for it from now on) and say so live. The caller
    starts whatever runs it: the UI's queued job, or an API job."""
    queued = QueuedCompaction.objects.create(
        session_id=session_id, requested_by_id=getattr(actor, "pk", None), strategy=strategy or "",
        instructions=instructions, behind=behind,
    )
    after_seq = Session.objects.filter(pk=session_id).values_list("last_seq", flat=True).first() or 0
    publish_transient(session_id=session_id, after_seq=after_seq, kind=QUEUED_EVENT,
                      detail={"queued_id": queued.pk, "behind": behind})
    return queued


def request_manual_compaction(
    *, session_id: int, actor, strategy: str | None = None, instructions: str = ""
) -> CompactionRequestOutcome:
    """Start a manual compaction now, or queue it behind the turn holding the session.

    Refused (CompactionRequestRefused, nothing changed) when extra instructions come with a method that sends no
    prompt, when another compaction runs or waits already, or when the session does not exist."""

    strategy = strategy or None
    if instructions.strip() and strategy not in (None, "local"):
        raise CompactionRequestRefused(LOCAL_ONLY_MESSAGE, status=400)
    behind = holder_to_queue_behind(session_id=session_id)
    if behind is not None:
        queued = queue_behind(session_id=session_id, actor=actor, behind=behind, strategy=strategy,
                              instructions=instructions)
        background.submit(run_queued_compaction_task, queued_id=queued.pk)
        return CompactionRequestOutcome(True, f"Queued behind the running {behind}: it starts when that ends.",
                                        queued.pk)
    try:
        start_compaction(session_id=session_id, actor_id=getattr(actor, "pk", None), strategy=strategy,
                         instructions=instructions)
    except SessionBusy as exc:  # taken between the check and the start: say so rather than guess
        raise CompactionRequestRefused(str(exc)) from None
    return CompactionRequestOutcome(False, "Compaction started: progress appears below.")


__all__ = ["EXPIRED_EVENT", "QUEUED_EVENT", "CompactionRequestRefused", "CompactionRequestOutcome", "has_queued",
           "holder_to_queue_behind", "queue_behind", "queued_for", "request_manual_compaction"]
