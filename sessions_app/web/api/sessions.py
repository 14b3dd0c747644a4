"""JSON API views for sessions: thin wrappers around sessions_app.rollout.services and selectors."""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.utils.http import urlencode
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from compactweb.api_errors import ApiError
from compactweb.converters import MAX_ID
from compactweb.roles import IsOperator
from sessions_app.models import RolloutLine
from sessions_app.rollout import selectors, services
from sessions_app.rollout.lease import SessionReadOnly
from sessions_app.rollout.validation import ItemValidationError, privileged_item_paths
from sessions_app.transfer import codex_sources
from sessions_app.web.api.json_lines import JSON_LINES_RESPONSES, json_lines_response
from sessions_app.web.api.lookups import session_or_404
from sessions_app.web.api.serializers import (
    AppendItemsSerializer,
    AppendResultSerializer,
    HistoryQuerySerializer,
    HistorySerializer,
    SessionCreateSerializer,
    SessionDetailSerializer,
    SessionListQuerySerializer,
    SessionSummarySerializer,
)
from sessions_app.web.instructing import ensure_may_instruct

ROLLOUT_CHUNK = 1000


def _invalid_item(exc: ItemValidationError) -> ApiError:
    return ApiError(status_code=400, code="invalid_item", message=str(exc))


class SessionList(APIView):
    permission_classes = [IsOperator]

    @extend_schema(parameters=[SessionListQuerySerializer], responses=SessionSummarySerializer(many=True))
    def get(self, request):
        query = SessionListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        limit = query.validated_data["limit"]
        state = query.validated_data.get("state") or None
        sessions = selectors.list_sessions(state=state, before=query.validated_data.get("before"), limit=limit + 1)
        page = sessions[:limit]
        response = Response(SessionSummarySerializer([selectors.session_summary(session=s) for s in page],
                                                     many=True).data)
        if len(sessions) > limit:  # a keyset page: the next one starts after this page's last session
            params = urlencode({**({"state": state} if state else {}), "before": page[-1].pk, "limit": limit})
            response["Link"] = f'<{request.build_absolute_uri(request.path)}?{params}>; rel="next"'
        return response

    @extend_schema(request=SessionCreateSerializer, responses={201: SessionSummarySerializer})
    def post(self, request):
        data = SessionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            session = services.do_create_session(actor=request.user, **data.validated_data)
        except ItemValidationError as exc:
            raise _invalid_item(exc) from None
        session = selectors.get_session(session_id=session.pk)
        return Response(SessionSummarySerializer(selectors.session_summary(session=session)).data,
                        status=status.HTTP_201_CREATED)


class SessionDetail(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses=SessionDetailSerializer)
    def get(self, request, pk: int):
        session = session_or_404(pk)
        source = codex_sources.source_summary(session=session)
        detail = {**selectors.session_summary(session=session), "token_counting": source and source["counting"]}
        return Response(SessionDetailSerializer(detail).data)


class SessionHistory(APIView):
    permission_classes = [IsOperator]

    @extend_schema(parameters=[HistoryQuerySerializer], responses={200: HistorySerializer,
                                                                    400: OpenApiResponse(description="bad page")})
    def get(self, request, pk: int):
        query = HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        session = session_or_404(pk)
        items, after = selectors.live_items_page(session=session, after=query.validated_data.get("after"),
                                                 limit=query.validated_data["limit"])
        return Response(HistorySerializer({"items": items, "next": after, "last_seq": session.last_seq or 0}).data)


class SessionItems(APIView):
    permission_classes = [IsOperator]

    @extend_schema(request=AppendItemsSerializer, responses={201: AppendResultSerializer})
    def post(self, request, pk: int):
        session = session_or_404(pk)
        data = AppendItemsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ensure_may_instruct(request.user, privileged_item_paths(data.validated_data["items"]))
        try:
            result = services.do_append_items(session=session, actor=request.user, **data.validated_data)
        except ItemValidationError as exc:
            raise _invalid_item(exc) from None
        except SessionReadOnly as exc:
            raise ApiError(status_code=409, code=exc.code, message=str(exc)) from None
        seqs = [line.seq for line in result.lines]
        body = {
            "session": selectors.session_summary(session=selectors.get_session(session_id=pk)),
            "first_seq": seqs[0] if seqs else session.last_seq,
            "last_seq": seqs[-1] if seqs else session.last_seq,
            "appended": len(data.validated_data["items"]),
        }
        return Response(AppendResultSerializer(body).data, status=status.HTTP_201_CREATED)


def _rollout_pieces(session_id: int, after: int) -> Iterator[str]:
    rollout = RolloutLine.objects.filter(session_id=session_id).order_by("seq")
    while lines := list(rollout.filter(seq__gt=after)[:ROLLOUT_CHUNK]):
        after = lines[-1].seq
        yield "".join(json.dumps(line.as_codex_line(), ensure_ascii=False, separators=(",", ":")) + "\n"
                      for line in lines)


class SessionRollout(APIView):
    """The rollout as JSON Lines, one Codex-shaped line each: {"seq", "timestamp", "type", "payload"} (spec §15)."""

    permission_classes = [IsOperator]

    @extend_schema(responses=JSON_LINES_RESPONSES)
    def get(self, request, pk: int):
        session = session_or_404(pk)
        try:
            after = int(request.query_params.get("after", 0))
        except ValueError:
            after = None
        if after is None or abs(after) > MAX_ID:  # past 64 bits SQLite would overflow mid-stream
            raise ApiError(status_code=400, code="invalid", message="after: must be an integer seq")
        return json_lines_response(
            request, pieces=_rollout_pieces(session.pk, after),
            filename=f"rollout-{session.thread_id}.jsonl", as_attachment=False,
        )
