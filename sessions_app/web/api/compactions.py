"""JSON API views for compactions: compact a session now (a job: run in the request, or on a worker), list a
session's compactions, read one."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app.models import CompactionAttempt
from compactweb.api_errors import ApiError
from compactweb.roles import IsOperator
from sessions_app.compactions import presentation, selectors
from sessions_app.jobs import services as jobs
from sessions_app.jobs.tasks import do_request_compaction
from sessions_app.models import Job
from sessions_app.web.api.compaction_serializers import (
    AttemptSerializer,
    CompactionDetailSerializer,
    CompactionListItemSerializer,
    CompactRequestSerializer,
)
from sessions_app.web.api.jobs import (
    WAIT_PARAMETER_HELP,
    JobAcceptedSerializer,
    accepted,
    wants_wait,
)
from sessions_app.web.api.lookups import found, require_session

ERROR_RESPONSES = {
    400: OpenApiResponse(description="invalid body, or a strategy this session's provider/policy cannot run"),
    404: OpenApiResponse(description="no such session"),
    409: OpenApiResponse(description="busy (another compaction runs or is queued already), or a PreCompact hook "
                                     "stopped the compaction (code interrupted)"),
    502: OpenApiResponse(description="the provider or the engine failed; error.code is the error kind and "
                                     "error.attempt_id the failed attempt; the history is unchanged"),
}


def _answer(status_code: int, result: dict) -> Response:
    """The compaction's outcome as the API answers it: 201 with the compaction's detail, or the error body."""
    if status_code == status.HTTP_201_CREATED:
        detail = presentation.compaction_detail(compaction=selectors.get_compaction(compaction_id=result["compaction"]))
        return Response(CompactionDetailSerializer(detail).data, status=status.HTTP_201_CREATED)
    return Response(result, status=status_code)


class SessionCompact(APIView):
    """Compact a session now, as a job. Without workers (no broker) and with the session free, the request runs
    the job and answers with the compaction (201) or the error. With workers, with `wait=false`, or while a turn (a
    simulator step, an API turn, a rollback) holds the session, the compaction is queued behind it and the answer
    is 202 with the job to follow at `GET /jobs/<id>` (or on the session's websocket): `queued` until the session
    is free (`queued` says what it waits behind), then `running`, then `succeeded` with the compaction or `failed`
    with the error. A request never waits for another process. One manual compaction per session at a time: a
    request while one is queued or running is refused with 409."""

    permission_classes = [IsOperator]

    @extend_schema(
        request=CompactRequestSerializer,
        parameters=[OpenApiParameter("wait", bool, required=False, description=WAIT_PARAMETER_HELP)],
        responses={201: CompactionDetailSerializer, 202: JobAcceptedSerializer, **ERROR_RESPONSES},
    )
    def post(self, request, pk: int):
        data = CompactRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        inline = wants_wait(request) and not jobs.runs_on_workers()
        job = do_request_compaction(session_id=pk, actor=request.user, trigger=body["trigger"], phase=body["phase"],
                                    strategy=body["method"], instructions=body["instructions"], inline=inline)
        if job.http_status is None:
            return accepted(job, queued=_queued_view(job))
        return _answer(job.http_status, job.result)


def _queued_view(job: Job) -> dict | None:
    behind = (job.params or {}).get("behind")
    if not behind:
        return None
    return {"id": job.pk, "behind": behind, "message": f"queued behind the running {behind}: it starts when that ends"}


class SessionCompactions(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: CompactionListItemSerializer(many=True), 404: OpenApiResponse()})
    def get(self, request, pk: int):
        require_session(pk)
        listing = [presentation.compaction_listing(compaction=c) for c in selectors.list_compactions(session_id=pk)]
        return Response(CompactionListItemSerializer(listing, many=True).data)


class CompactionDetail(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: CompactionDetailSerializer, 404: OpenApiResponse()})
    def get(self, request, pk: int):
        compaction = found("compaction", pk, lambda: selectors.get_compaction(compaction_id=pk))
        return Response(CompactionDetailSerializer(presentation.compaction_detail(compaction=compaction)).data)


class SessionAttempts(APIView):
    """Every compaction attempt of a session, newest first, with its analytics (spec §10): completed ones and
    the failed and interrupted ones that produced no compaction. `?status=failed|interrupted|completed|running`."""

    permission_classes = [IsOperator]

    @extend_schema(responses={200: AttemptSerializer(many=True), 400: OpenApiResponse(), 404: OpenApiResponse()})
    def get(self, request, pk: int):
        require_session(pk)
        wanted = request.query_params.get("status") or None
        if wanted is not None and wanted not in CompactionAttempt.Status.values:
            raise ApiError(status_code=400, code="invalid", message=(
                f"status: must be one of {', '.join(CompactionAttempt.Status.values)}, got {wanted!r}"))
        attempts = selectors.attempts_for(session_id=pk, status=wanted).prefetch_related("hook_runs")
        return Response(AttemptSerializer(attempts, many=True).data)


class AttemptDetail(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: AttemptSerializer, 404: OpenApiResponse()})
    def get(self, request, pk: int):
        attempt = found("attempt", pk, lambda: selectors.get_attempt(attempt_id=pk))
        return Response(AttemptSerializer(attempt).data)
