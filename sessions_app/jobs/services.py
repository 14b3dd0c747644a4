"""Heavy work off the request: compactions, replays and imports as jobs a worker runs and a caller follows.

A job is one row (`Job`) and one runner (`run_job`): on a Celery worker when a broker is configured
(`sessions_app.jobs.tasks.run_job`), else on the in-process pool, or in the request itself when the caller asked to
wait and nothing needs waiting for (`do_submit_job(inline=True)`: the request is the runner, it never polls). A
caller that did not get the outcome gets 202 with the job and follows it at `GET /api/v1/jobs/<id>` or over the
session's websocket: live events report a job's progress on its session's group (`job.queued`, `job.running`,
`job.finished`) next to the compaction's own.

A manual compaction ("Compact now" on a page, a recovery, the API) is such a job (`do_request_compaction`); while
a turn holds its session the runner waits for it on the worker (sessions_app.compactions.queue.wait_for_lease).

Each job's outcome is what the synchronous API answers (`http_status`, `result`). The work of each kind below
returns its result or raises a domain error (compactweb.domain_errors); compactweb.api_errors turns either into
that answer, as it does for a request.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from compaction_app.models import CompactionPolicy, Provider
from compactweb import api_errors, background
from compactweb.api_errors import Answer
from compactweb.domain_errors import Conflict, Invalid, NotFound
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.compactions import queue, services
from sessions_app.models import Job, Session
from sessions_app.rollout.events import publish_transient
from sessions_app.rollout.lease import Lease, SessionBusy, release
from sessions_app.transfer.importer import do_import_rollout
from sessions_app.transfer.refusals import InvalidRollout
from sessions_app.transfer.replay import do_replay_session

logger = logging.getLogger(__name__)

COMPACTION_PARAMS = ("trigger", "phase", "strategy", "instructions")  # a compaction job's params also say `behind`

# --- what each kind of job runs (also the synchronous API's path): its result, or a domain error -----------------

def _session_missing(session_id: int) -> NotFound:
    return NotFound(f"session {session_id} does not exist")


def _row(model, pk: int | None):
    """The configuration row a job names (None for none); a row deleted since the job was asked for is a refusal."""
    try:
        return model.objects.get(pk=pk) if pk is not None else None
    except model.DoesNotExist as exc:
        raise Invalid(str(exc)) from None


def compact(*, session_id: int, actor, trigger: str = "manual", phase: str | None = None,
            strategy: str | None = None, instructions: str = "", lease: Lease | None = None) -> dict[str, Any]:
    """Compact the session (under `lease` when the caller took it already): {"compaction": id}."""
    try:
        compaction = services.do_compact_session(
            session_id=session_id, actor=actor, trigger=trigger, phase=phase, strategy=strategy,
            instructions=instructions, lease=lease,
        )
    except Session.DoesNotExist:
        raise _session_missing(session_id) from None
    return {"compaction": compaction.pk}


def replay(*, session_id: int, actor, policy: int, provider: int | None = None,
           title: str | None = None) -> dict[str, Any]:
    try:
        return do_replay_session(session_id=session_id, policy=_row(CompactionPolicy, policy),
                                 provider=_row(Provider, provider), title=title, actor=actor).as_dict()
    except Session.DoesNotExist:
        raise _session_missing(session_id) from None


def import_rollout(*, actor, lines: list, source_name: str, title: str | None = None, provider: int | None = None,
                   policy: int | None = None, new_thread_id: bool = False, strict: bool = False) -> dict[str, Any]:
    try:
        return do_import_rollout(
            lines=lines, source_name=source_name, title=title, provider=_row(Provider, provider),
            policy=_row(CompactionPolicy, policy), new_thread_id=new_thread_id, actor=actor, strict=strict,
        ).as_dict()
    except RolloutImportError as exc:
        raise InvalidRollout(exc) from None


def _run_kind(job: Job, *, lease: Lease | None = None) -> dict[str, Any]:
    actor = get_user_model().objects.filter(pk=job.actor_id).first() if job.actor_id else None
    if job.kind == Job.Kind.COMPACTION:
        params = {k: v for k, v in job.params.items() if k in COMPACTION_PARAMS}
        return compact(session_id=job.session_id, actor=actor, lease=lease, **params)
    if job.kind == Job.Kind.REPLAY:
        return replay(session_id=job.session_id, actor=actor, **job.params)
    if job.kind == Job.Kind.IMPORT:
        return import_rollout(actor=actor, lines=bytes(job.payload).splitlines(keepends=True), **job.params)
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
            return _end_unrun(job_id, api_errors.error_answer(_session_missing(job.session_id)))
        except SessionBusy as exc:  # a session that follows a Codex rollout file never frees up
            return _end_unrun(job_id, api_errors.error_answer(exc))
        if lease is None:
            if inline:
                return None
            return _end_unrun(job_id, api_errors.error_answer(Conflict(
                f"session {job.session_id} stayed busy: the compaction queued behind its turn was dropped; "
                "ask again")))
    try:
        if not _take(job_id):
            logger.info("job %s was already taken", job_id)
            return None
        job = Job.objects.get(pk=job_id)
        publish_job_event(job, "job.running")
        try:
            outcome = api_errors.answer(lambda: _run_kind(job, lease=lease))
        except Exception as exc:  # an outcome nobody foresaw: still an answer, never a job left running
            logger.exception("job %s failed", job_id)
            outcome = api_errors.unexpected_answer(exc)
    finally:
        if lease is not None:
            release(lease)
    return _finish(job_id, outcome)


def _end_unrun(job_id: int, outcome: Answer) -> Job | None:
    """A job that could not start ends with `outcome` (None when another runner took it meanwhile)."""
    return _finish(job_id, outcome) if _take(job_id, start=False) else None


def _take(job_id: int, *, start: bool = True) -> bool:
    """Take a queued job (a conditional update: a job runs at most once); `start=False` to end it unrun (it keeps
    no start time)."""
    return bool(Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, **({"started_at": timezone.now()} if start else {})
    ))


def _finish(job_id: int, outcome: Answer) -> Job:
    job = Job.objects.get(pk=job_id)
    session_id = job.session_id
    if job.kind == Job.Kind.IMPORT and outcome.ok:
        session_id = outcome.body.get("session")
    Job.objects.filter(pk=job_id).update(
        status=Job.Status.SUCCEEDED if outcome.ok else Job.Status.FAILED, http_status=outcome.status,
        result=outcome.body, finished_at=timezone.now(), session_id=session_id,
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
