"""Manual compactions waiting for their session: what a new request is refused for, what simulator steps and the
status box read, and the wait on the worker for the turn that holds the session.

A manual compaction ("Compact now" on a page, a recovery, `POST /api/v1/sessions/<id>/compact`) is one `Job` of
kind `compaction` (sessions_app.jobs writes it and runs it). A session has at most one such job queued or running
(`one_active_compaction_job`, a partial unique index): twenty requests at once make one job, the nineteen others are
refused with 409, whatever process answers them. The request reads the lease once (`holder_to_queue_behind`): a
compaction holding it refuses the request, a turn holding it (a simulator step, an API turn, a rollback) is what
the job waits behind (`wait_for_lease`, on the worker, never in a request). Meanwhile simulator steps of the
session wait (`has_queued`), so the compaction cannot be starved by the next step.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.utils import timezone

from compactweb import statements
from compactweb.domain_errors import Conflict, Invalid, NotFound
from sessions_app.compactions.services import lease_is_free
from sessions_app.models import Job, Session
from sessions_app.rollout.lease import Lease, SessionBusy, SessionReadOnly, acquire, refuse_if_followed

COMPACTION_PURPOSE = "compaction"
WAIT_SECONDS = 600.0  # a queued compaction gives up when the session stays held this long
POLL_SECONDS = 0.25
LOCAL_ONLY_MESSAGE = (
    "Extra instructions apply to local summarisation only: remote and new-window compaction send no prompt."
)
ALREADY_ACTIVE_MESSAGE = ("A manual compaction of this session is already queued or running; it runs when the "
                          "current step ends, wait for its result.")
RUNNING_MESSAGE = "A compaction of this session is running already; wait for its result."


class CompactionRequestRefused(Conflict):
    """The request cannot be started or queued; nothing changed. A conflict (the session is busy or read-only)
    unless one of the two kinds below."""


class NoSuchSession(NotFound, CompactionRequestRefused):
    pass


class InstructionsNotSent(Invalid, CompactionRequestRefused):
    """Extra instructions asked of a method that sends no prompt."""

    code = "compaction_refused"


def fresh_since() -> datetime:
    """The oldest creation time of a queued compaction that still has a live waiter: its waiter gives up after
    WAIT_SECONDS, and one that never started by then (a dead pool, a broker without workers) never will."""
    return timezone.now() - timedelta(seconds=WAIT_SECONDS)


def waiting_jobs(*, session_id: int):
    return Job.objects.filter(session_id=session_id, kind=Job.Kind.COMPACTION, status=Job.Status.QUEUED,
                              created_at__gte=fresh_since())


def has_queued(*, session_id: int) -> bool:
    """Whether a manual compaction waits for the session. Every simulator step asks before it takes the session, so
    this is `waiting_jobs` as a statement written once (compactweb.statements): the ORM built the same `exists()`
    in about five times the time the query took."""
    return _QUEUED.exists(where=(session_id, Job.Kind.COMPACTION.value, Job.Status.QUEUED.value, fresh_since()))


_QUEUED = statements.Select(Job, columns=(), where=("session", "kind", "status", "created_at__gte"))


def queued_for(*, session_id: int) -> dict | None:
    """The session's waiting compaction, for the status box (None when there is none)."""
    job = waiting_jobs(session_id=session_id).order_by("pk").values("id", "params", "created_at").first()
    if job is None:
        return None
    params = job["params"] or {}
    return {"id": job["id"], "strategy": params.get("strategy") or "", "behind": params.get("behind") or "",
            "created_at": job["created_at"]}


def holder_to_queue_behind(*, session_id: int) -> str | None:
    """The one lease read of a request: None when the session is free, else the purpose of the turn holding it.
    Refused when the session does not exist or a compaction holds it."""
    try:
        refuse_if_followed(session_id=session_id)
        lease_is_free(session_id=session_id)
    except SessionReadOnly as exc:
        raise CompactionRequestRefused(str(exc), code=exc.code) from None
    except Session.DoesNotExist:
        raise NoSuchSession(f"Session {session_id} does not exist.") from None
    except SessionBusy as exc:
        if exc.purpose == COMPACTION_PURPOSE:
            raise CompactionRequestRefused(RUNNING_MESSAGE) from None
        return exc.purpose
    return None


def check_instructions(*, strategy: str | None, instructions: str) -> None:
    if instructions.strip() and strategy not in (None, "", "local"):
        raise InstructionsNotSent(LOCAL_ONLY_MESSAGE)


def wait_for_lease(*, session_id: int, wait_seconds: float = WAIT_SECONDS, poll_seconds: float = POLL_SECONDS,
                   clock=time.monotonic, sleep=time.sleep) -> Lease | None:
    """Take the session's lease for a compaction job, waiting (on the worker) until the turn holding it releases
    it; None when it stayed held for `wait_seconds`. Raises Session.DoesNotExist when the session is gone,
    SessionBusy when another compaction holds it, SessionReadOnly when it follows a Codex rollout file."""
    deadline = clock() + wait_seconds
    while True:
        try:
            return acquire(session_id=session_id, purpose=COMPACTION_PURPOSE)
        except SessionReadOnly:
            raise  # a followed session never frees up
        except SessionBusy as exc:
            if exc.purpose == COMPACTION_PURPOSE:
                raise  # another compaction took it meanwhile: refused, as the request would have been
            if clock() >= deadline:
                return None
            sleep(poll_seconds)


def request_notice(job: Job) -> str:
    """What a page says about a manual compaction it just asked for."""
    behind = (job.params or {}).get("behind")
    if behind:
        return f"Queued behind the running {behind}: it starts when that ends."
    return "Compaction started: progress appears below."
