"""Heavy work off the request: compactions, replays and imports as jobs a worker runs and a caller follows.

A job is one row (`Job`) and one runner (`run_job`): on a Celery worker when a broker is configured
(`sessions_app.jobs.tasks.run_job`), else on the in-process pool, or in the request itself when the caller asked to
wait and nothing needs waiting for (`do_submit_job(inline=True)`: the request is the runner, it never polls). A
caller that did not get the outcome gets 202 with the job and follows it at `GET /api/v1/jobs/<id>` or over the
session's websocket: live events report a job's progress on its session's group (`job.queued`, `job.running`,
`job.finished`) next to the compaction's own.

A manual compaction ("Compact now" on a page, a recovery, the API) is such a job (`do_request_compaction`); while
a turn holds its session the runner waits for it on the worker (sessions_app.compactions.queue.wait_for_lease).

Each job's outcome is what the synchronous API answers (`http_status`, `result`): the runners below are the one
place that turns a service call and its refusals into that answer.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from compaction_app.models import CompactionPolicy, Provider
from compactweb import background
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.compactions import queue, services
from sessions_app.models import Job, Session
from sessions_app.rollout.events import publish_transient
from sessions_app.rollout.lease import Lease, LeaseLost, SessionBusy, release
from sessions_app.transfer.importer import do_import_rollout
from sessions_app.transfer.refusals import TransferRefused
from sessions_app.transfer.replay import do_replay_session

logger = logging.getLogger(__name__)

COMPACTION_PARAMS = ("trigger", "phase", "strategy", "instructions")  # a compaction job's params also say `behind`

Outcome = tuple[int, dict[str, Any]]


def error(status: int, code: str, message: str, **extra: Any) -> Outcome:
    return status, {"error": {"code": code, "message": message, **extra}}


def rollout_refusal(exc: RolloutImportError) -> Outcome:
    """A refused rollout file: 400 `invalid_rollout` with its bad lines."""
    return error(400, "invalid_rollout", str(exc), lines=[{"line": no, "message": msg} for no, msg in exc.errors])


# --- what each kind of job runs (also the synchronous API's path) -------------------------------------------------

def compaction_outcome(*, session_id: int, actor, trigger: str = "manual", phase: str | None = None,
                       strategy: str | None = None, instructions: str = "", lease: Lease | None = None) -> Outcome:
    """Compact the session (under `lease` when the caller took it already); (201, {"compaction": id}) or the API's
    error answer."""

    try:
        compaction = services.do_compact_session(
            session_id=session_id, actor=actor, trigger=trigger, phase=phase, strategy=strategy,
            instructions=instructions, lease=lease,
        )
    except Session.DoesNotExist:
        return error(404, "not_found", f"session {session_id} does not exist")
    except SessionBusy as exc:
        return error(409, getattr(exc, "code", "busy"), str(exc))
    except LeaseLost as exc:
        return error(409, "lease_lost", str(exc))
    except services.CompactionRefused as exc:
        return error(400, "compaction_refused", str(exc))
    except services.CompactionInterrupted as exc:
        return error(409, "interrupted",
                     f"a PreCompact hook stopped the compaction: {exc.stop_reason or 'no reason given'}",
                     attempt_id=exc.attempt.pk)
    except services.CompactionFailed as exc:
        extra = {"http_status": exc.http_status} if exc.http_status is not None else {}
        return error(502, exc.kind, exc.message, attempt_id=exc.attempt.pk, **extra)
    return 201, {"compaction": compaction.pk}


def replay_outcome(*, session_id: int, actor, policy: int, provider: int | None = None,
                   title: str | None = None) -> Outcome:

    try:
        result = do_replay_session(
            session_id=session_id, policy=CompactionPolicy.objects.get(pk=policy),
            provider=Provider.objects.get(pk=provider) if provider is not None else None, title=title, actor=actor,
        )
    except Session.DoesNotExist:
        return error(404, "not_found", f"session {session_id} does not exist")
    except (CompactionPolicy.DoesNotExist, Provider.DoesNotExist) as exc:
        return error(400, "invalid", str(exc))
    except TransferRefused as exc:
        return error(exc.status, exc.code, str(exc))
    return 201, result.as_dict()


def import_outcome(*, actor, lines: list, source_name: str, title: str | None = None, provider: int | None = None,
                   policy: int | None = None, new_thread_id: bool = False, strict: bool = False) -> Outcome:

    try:
        result = do_import_rollout(
            lines=lines, source_name=source_name, title=title,
            provider=Provider.objects.get(pk=provider) if provider is not None else None,
            policy=CompactionPolicy.objects.get(pk=policy) if policy is not None else None,
            new_thread_id=new_thread_id, actor=actor, strict=strict,
        )
    except RolloutImportError as exc:
        return rollout_refusal(exc)
    except (CompactionPolicy.DoesNotExist, Provider.DoesNotExist) as exc:
        return error(400, "invalid", str(exc))
    except TransferRefused as exc:
        return error(exc.status, exc.code, str(exc))
    return 201, result.as_dict()


def _run_kind(job: Job, *, lease: Lease | None = None) -> Outcome:
    actor = get_user_model().objects.filter(pk=job.actor_id).first() if job.actor_id else None
    if job.kind == Job.Kind.COMPACTION:
        params = {k: v for k, v in job.params.items() if k in COMPACTION_PARAMS}
        return compaction_outcome(session_id=job.session_id, actor=actor, lease=lease, **params)
    if job.kind == Job.Kind.REPLAY:
        return replay_outcome(session_id=job.session_id, actor=actor, **job.params)
    if job.kind == Job.Kind.IMPORT:
        return import_outcome(actor=actor, lines=bytes(job.payload).splitlines(keepends=True), **job.params)
    raise ValueError(f"unknown job kind {job.kind!r}")


# --- submitting, running, waiting ---------------------------------------------------------------------------------

def runs_on_workers() -> bool:
    return background.uses_broker()


def job_event_detail(job: Job) -> dict[str, Any]:
    """`job_view` as a live event carries it: plain JSON values (timestamps as ISO 8601 strings, as the API shows
    them). The Redis channel layer packs messages with msgpack, which has no datetime: a datetime made every
    send raise TypeError, so a page watching through Redis never saw a job's progress."""
    return json.loads(json.dumps(job_view(job), cls=DjangoJSONEncoder))


def publish_job_event(job: Job, kind: str) -> None:
    if job.session_id is None:
        return
    try:
        publish_transient(session_id=job.session_id, after_seq=0, kind=kind, detail=job_event_detail(job))
    except Exception:  # progress is a courtesy; the job row is the record
        logger.exception("could not publish %s of job %s", kind, job.pk)


def run_job(*, job_id: int, inline: bool = False, **waiting: Any) -> Job | None:
    """Run a queued job once and store its outcome; None when it was already taken (a redelivered task).

    A compaction first takes its session's lease, waiting (`waiting`: queue.wait_for_lease's pacing) while a turn
    holds it; the job stays `queued` meanwhile and turns `running` once it holds the session. `inline` (the request
    runs the job) never waits: a session taken since the request read it leaves the job queued and returns None,
    for the caller to hand it to the background."""
    job = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).first()
    if job is None:
        return None
    lease = None
    if job.kind == Job.Kind.COMPACTION:
        try:
            lease = queue.wait_for_lease(session_id=job.session_id, **({"wait_seconds": 0} if inline else waiting))
        except Session.DoesNotExist:
            return _end_unrun(job_id, error(404, "not_found", f"session {job.session_id} does not exist"))
        except SessionBusy as exc:  # a session that follows a Codex rollout file never frees up
            return _end_unrun(job_id, error(409, getattr(exc, "code", "busy"), str(exc)))
        if lease is None:
            if inline:
                return None
            return _end_unrun(job_id, error(409, "busy", f"session {job.session_id} stayed busy: the compaction "
                                                          "queued behind its turn was dropped; ask again"))
    try:
        if not _take(job_id):
            logger.info("job %s was already taken", job_id)
            return None
        job = Job.objects.get(pk=job_id)
        publish_job_event(job, "job.running")
        try:
            outcome = _run_kind(job, lease=lease)
        except Exception as exc:  # an outcome nobody foresaw: still an answer, never a job left running
            logger.exception("job %s failed", job_id)
            outcome = error(500, "internal_error", f"{type(exc).__name__}: the job failed")
    finally:
        if lease is not None:
            release(lease)
    return _finish(job_id, outcome)


def _end_unrun(job_id: int, outcome: Outcome) -> Job | None:
    """A job that could not start ends with `outcome` (None when another runner took it meanwhile)."""
    return _finish(job_id, outcome) if _take(job_id, start=False) else None


def _take(job_id: int, *, start: bool = True) -> bool:
    """Take a queued job (a conditional update: a job runs at most once); `start=False` to end it unrun (it keeps
    no start time)."""
    return bool(Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, **({"started_at": timezone.now()} if start else {})
    ))


def _finish(job_id: int, outcome: Outcome) -> Job:
    status, result = outcome
    job = Job.objects.get(pk=job_id)
    session_id = job.session_id
    if job.kind == Job.Kind.IMPORT and status < 400:
        session_id = result.get("session")
    Job.objects.filter(pk=job_id).update(
        status=Job.Status.SUCCEEDED if status < 400 else Job.Status.FAILED, http_status=status, result=result,
        finished_at=timezone.now(), session_id=session_id,
    )
    job.refresh_from_db()
    publish_job_event(job, "job.finished")
    return job


# --- reads --------------------------------------------------------------------------------------------------------

def get_job(*, job_id: int) -> Job:
    return Job.objects.get(pk=job_id)


def job_view(job: Job) -> dict[str, Any]:
    """What the API shows of a job (JobSerializer)."""
    return {
        "id": job.pk, "kind": job.kind, "status": job.status, "session": job.session_id,
        "url": f"/api/v1/jobs/{job.pk}", "http_status": job.http_status, "result": job.result,
        "created_at": job.created_at, "started_at": job.started_at, "finished_at": job.finished_at,
    }
