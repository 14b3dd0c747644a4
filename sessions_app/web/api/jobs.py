"""JSON API for jobs: heavy work a runner runs (sessions_app.jobs). `GET /jobs/<id>` reads one; the helpers here
let the compaction, replay and import views answer 202 with the job, or its outcome once it is finished."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from compactweb.api_errors import ApiError
from compactweb.roles import IsOperator
from sessions_app.jobs import liveness
from sessions_app.jobs import services as jobs
from sessions_app.models import Job
from sessions_app.web.api.lookups import found


class JobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Job.Kind.choices)
    status = serializers.ChoiceField(choices=Job.Status.choices)
    session = serializers.IntegerField(allow_null=True, help_text="The session worked on (an import: once made).")
    url = serializers.CharField(help_text="Where to poll the job.")
    http_status = serializers.IntegerField(allow_null=True, help_text="The status the API answers for the outcome.")
    result = serializers.JSONField(allow_null=True, help_text="The outcome: the API's answer, or its error body.")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class QueuedBehindSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The queued compaction job (the session page shows it as queued).")
    behind = serializers.CharField(help_text="What held the session when the compaction was asked for (a turn, ...).")
    message = serializers.CharField()


class JobAcceptedSerializer(serializers.Serializer):
    job = JobSerializer()
    queued = QueuedBehindSerializer(
        required=False, help_text="Only for a compaction queued behind the turn holding the session: the job stays "
                                  "`queued` until that turn ends, then turns `running`, then `succeeded` or `failed`.")


WAIT_PARAMETER_HELP = (
    "wait=true: the request runs the work and answers with the outcome, where it can (no broker configured, and "
    "for a compaction a free session); elsewhere 202 with the job to follow. wait=false: 202 with the job. "
    "Default: true without a broker, false with one. A request never waits for another process."
)


def wants_wait(request, *, default: bool | None = None) -> bool:
    """The caller's `wait` (query parameter or body field); by default `default`, or (None) wait only when there
    are no workers."""
    raw = request.query_params.get("wait")
    if raw is None and hasattr(request.data, "get"):
        raw = request.data.get("wait")
    if raw is None or raw == "":
        return not jobs.runs_on_workers() if default is None else default
    if isinstance(raw, bool):
        return raw
    value = str(raw).strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ApiError(status_code=400, code="invalid", message="wait: give true or false")


def accepted(job: Job, *, queued: dict | None = None) -> Response:
    body = {"job": JobSerializer(jobs.job_view(job)).data}
    if queued is not None:
        body["queued"] = QueuedBehindSerializer(queued).data
    response = Response(body, status=202)
    response["Location"] = jobs.job_view(job)["url"]
    return response


def answer_job(job: Job, *, outcome: type[serializers.Serializer]) -> Response:
    """202 with the job while it is not finished, else its outcome, shown by `outcome` when it succeeded (an error
    keeps the API's error shape)."""
    if job.http_status is None:
        return accepted(job)
    body = outcome(job.result).data if 200 <= job.http_status < 300 else job.result
    return Response(body, status=job.http_status)


class JobDetail(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: JobSerializer, 404: OpenApiResponse(description="no such job")})
    def get(self, request, pk: int):
        liveness.reap_dead_jobs(job_id=pk)  # a job whose worker died ends here too, scheduler or not
        job = found("job", pk, lambda: jobs.get_job(job_id=pk))
        return Response(JobSerializer(jobs.job_view(job)).data)
