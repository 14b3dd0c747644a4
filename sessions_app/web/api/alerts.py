"""JSON API for alerts (operator role): list with filters, acknowledge, snooze and silence per rule and per
session, lift a silence. Rows and rules: sessions_app.compactions.alerts; docs/alerts.md."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app.models import Alert, AlertSilence
from compactweb.api_errors import ApiError
from compactweb.converters import MAX_ID
from compactweb.roles import IsOperator
from sessions_app.compactions import alerts
from sessions_app.models import Session

KINDS = [k for k, _ in Alert.Kind.choices]


class AlertFilterSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=KINDS, required=False)
    session = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    state = serializers.ChoiceField(choices=["open", "snoozed", "acknowledged", "all"], default="all",
                                    help_text="open: not acknowledged nor covered by a snooze or silence")
    since = serializers.DateTimeField(required=False, help_text="Only alerts raised (last) at or after this time.")
    limit = serializers.IntegerField(default=100, min_value=1, max_value=1000)


class AlertSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    kind = serializers.CharField()
    session = serializers.IntegerField(source="session_id", allow_null=True, help_text="null: a fleet storm")
    message = serializers.CharField()
    detail = serializers.DictField()
    count = serializers.IntegerField(help_text="How many times this cause was raised while the alert was open.")
    paused = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    last_at = serializers.DateTimeField(allow_null=True)
    compactions = serializers.SerializerMethodField()
    attempts = serializers.SerializerMethodField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.CharField(source="acknowledged_by.username", allow_null=True, default=None)

    def get_compactions(self, alert) -> list[int]:
        return [c.pk for c in alert.compactions.all()]

    def get_attempts(self, alert) -> list[int]:
        return [a.pk for a in alert.attempts.all()]


class SilenceRequestSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["", *KINDS], default="", help_text="The rule (blank: every rule).")
    session = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_ID,
                                       help_text="The session (blank: fleet-wide).")
    minutes = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=60 * 24 * 30,
                                       help_text="Snooze for this many minutes (blank: silence until lifted).")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")


class SilenceSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    kind = serializers.CharField(allow_blank=True)
    session = serializers.IntegerField(source="session_id", allow_null=True)
    until = serializers.DateTimeField(allow_null=True, help_text="null: silenced until lifted")
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    reason = serializers.CharField(allow_blank=True)


class AlertList(APIView):
    permission_classes = [IsOperator]

    @extend_schema(parameters=[AlertFilterSerializer], responses={200: AlertSerializer(many=True),
                                                                   400: OpenApiResponse(description="bad filter")})
    def get(self, request):
        query = AlertFilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        f = query.validated_data
        rows = alerts.alerts_filtered(kind=f.get("kind"), session_id=f.get("session"), state=f["state"],
                                      since=f.get("since"), limit=f["limit"])
        return Response(AlertSerializer(rows, many=True).data)


class AlertAcknowledge(APIView):
    permission_classes = [IsOperator]

    @extend_schema(request=None, responses={200: AlertSerializer, 404: OpenApiResponse()})
    def post(self, request, pk: int):
        alert = get_object_or_404(Alert, pk=pk)
        return Response(AlertSerializer(alerts.do_acknowledge_alert(alert=alert, actor=request.user)).data)


class AlertSilences(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={200: SilenceSerializer(many=True)})
    def get(self, request):
        return Response(SilenceSerializer(alerts.active_silences(), many=True).data)

    @extend_schema(request=SilenceRequestSerializer, responses={201: SilenceSerializer, 400: OpenApiResponse()})
    def post(self, request):
        body = SilenceRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        session_id = data.get("session")
        if session_id is not None:
            get_object_or_404(Session, pk=session_id)
        try:
            silence = alerts.do_silence_alerts(kind=data["kind"], session_id=session_id, minutes=data.get("minutes"),
                                               actor=request.user, reason=data["reason"])
        except ValueError as exc:
            raise ApiError(status_code=400, code="invalid", message=str(exc)) from None
        return Response(SilenceSerializer(silence).data, status=status.HTTP_201_CREATED)


class AlertSilenceDetail(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses={204: None, 404: OpenApiResponse()})
    def delete(self, request, pk: int):
        alerts.do_lift_silence(silence=get_object_or_404(AlertSilence, pk=pk), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
