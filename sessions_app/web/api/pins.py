"""JSON API for pinned context: list and unpin (operator role), pin (support role: sessions_app.web.instructing). Pins are rollout lines (sessions_app.compactions.retention)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app.engine.pins import MAX_PIN_CHARS, PinBudgetExceeded, PinKind
from compactweb.api_errors import ApiError
from compactweb.roles import IsOperator
from sessions_app.compactions import retention
from sessions_app.models import Session
from sessions_app.web.instructing import PIN_PATH, ensure_may_instruct


class PinSerializer(serializers.Serializer):
    id = serializers.CharField(read_only=True)
    kind = serializers.ChoiceField(choices=[k.value for k in PinKind], default=PinKind.FACT.value)
    text = serializers.CharField(max_length=MAX_PIN_CHARS, trim_whitespace=True)


class PinBudgetSerializer(serializers.Serializer):
    used = serializers.IntegerField(help_text="Tokens the pinned block takes now.")
    budget = serializers.IntegerField(help_text="The pins' total token budget; pinning past it is refused (409).")
    source = serializers.CharField(help_text="Where the budget comes from: the policy, or the default share.")


class PinListSerializer(serializers.Serializer):
    pins = PinSerializer(many=True)
    budget = PinBudgetSerializer()


class SessionPins(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: PinListSerializer})
    def get(self, request, pk: int):
        session = get_object_or_404(Session.objects.select_related("provider", "policy"), pk=pk)
        pins = [pin.to_dict() for pin in retention.session_pins(session_id=session.pk)]
        return Response(PinListSerializer({"pins": pins, "budget": retention.pin_usage(session=session)}).data)

    @extend_schema(request=PinSerializer, responses={201: PinSerializer, 409: OpenApiResponse(
        description="the pins would pass their token budget (the figures are in the message)")})
    def post(self, request, pk: int):
        session = get_object_or_404(Session, pk=pk)
        body = PinSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ensure_may_instruct(request.user, [PIN_PATH])
        try:
            pin = retention.do_add_pin(session=session, kind=body.validated_data["kind"],
                                       text=body.validated_data["text"], actor=request.user)
        except PinBudgetExceeded as exc:
            raise ApiError(status_code=409, code="pin_budget_exceeded", message=f"not pinned: {exc}") from None
        return Response(PinSerializer(pin.to_dict()).data, status=status.HTTP_201_CREATED)


class SessionPin(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={204: None})
    def delete(self, request, pk: int, pin_id: str):
        session = get_object_or_404(Session, pk=pk)
        try:
            retention.do_remove_pin(session=session, pin_id=pin_id, actor=request.user)
        except KeyError:
            raise ApiError(status_code=404, code="not_found", message=f"session {pk} has no pin {pin_id}") from None
        return Response(status=status.HTTP_204_NO_CONTENT)
