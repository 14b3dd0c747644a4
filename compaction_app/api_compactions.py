"""JSON API views for compactions: compact a session now, list a session's compactions, read one."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app import selectors, services
from compaction_app.compaction_serializers import (
    CompactionDetailSerializer,
    CompactionListItemSerializer,
    CompactRequestSerializer,
)
from compaction_app.models import Compaction
from compactweb.api_errors import ApiError
from compactweb.roles import IsOperator
from sessions_app.locks import LeaseLost, SessionBusy
from sessions_app.models import Session

ERROR_RESPONSES = {
    400: OpenApiResponse(description="invalid body, or a strategy this session's provider/policy cannot run"),
    404: OpenApiResponse(description="no such session"),
    409: OpenApiResponse(description="busy (another compaction, turn or rollback holds the session), or a "
                                     "PreCompact hook stopped the compaction (code interrupted)"),
    502: OpenApiResponse(description="the provider or the engine failed; error.code is the error kind and "
                                     "error.attempt_id the failed attempt; the history is unchanged"),
}


def _attempt_error(*, status_code: int, code: str, message: str, attempt_id: int, http_status=None) -> Response:
    """The API error shape plus the attempt that recorded the failure (and the provider's HTTP status)."""
    error = {"code": code, "message": message, "attempt_id": attempt_id}
    if http_status is not None:
        error["http_status"] = http_status
    return Response({"error": error}, status=status_code)


class SessionCompact(APIView):
    permission_classes = [IsOperator]

    @extend_schema(request=CompactRequestSerializer, responses={201: CompactionDetailSerializer, **ERROR_RESPONSES})
    def post(self, request, pk: int):
        data = CompactRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        try:
            compaction = services.do_compact_session(
                session_id=pk, actor=request.user, trigger=body["trigger"], phase=body["phase"],
                strategy=body["strategy"], instructions=body["instructions"],
            )
        except Session.DoesNotExist:
            raise ApiError(status_code=404, code="not_found", message=f"session {pk} does not exist") from None
        except SessionBusy as exc:
            raise ApiError(status_code=409, code="busy", message=str(exc)) from None
        except LeaseLost as exc:
            raise ApiError(status_code=409, code="lease_lost", message=str(exc)) from None
        except services.CompactionRefused as exc:
            raise ApiError(status_code=400, code="compaction_refused", message=str(exc)) from None
        except services.CompactionInterrupted as exc:
            return _attempt_error(
                status_code=409, code="interrupted",
                message=f"a PreCompact hook stopped the compaction: {exc.stop_reason or 'no reason given'}",
                attempt_id=exc.attempt.pk,
            )
        except services.CompactionFailed as exc:
            return _attempt_error(
                status_code=502, code=exc.kind, message=exc.message, attempt_id=exc.attempt.pk,
                http_status=exc.http_status,
            )
        detail = selectors.compaction_detail(compaction=selectors.get_compaction(compaction_id=compaction.pk))
        return Response(detail, status=status.HTTP_201_CREATED)


class SessionCompactions(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: CompactionListItemSerializer(many=True), 404: OpenApiResponse()})
    def get(self, request, pk: int):
        if not Session.objects.filter(pk=pk).exists():
            raise ApiError(status_code=404, code="not_found", message=f"session {pk} does not exist")
        return Response([selectors.compaction_listing(compaction=c) for c in selectors.list_compactions(session_id=pk)])


class CompactionDetail(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: CompactionDetailSerializer, 404: OpenApiResponse()})
    def get(self, request, pk: int):
        try:
            compaction = selectors.get_compaction(compaction_id=pk)
        except Compaction.DoesNotExist:
            raise ApiError(status_code=404, code="not_found", message=f"compaction {pk} does not exist") from None
        return Response(selectors.compaction_detail(compaction=compaction))
