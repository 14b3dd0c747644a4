"""JSON API for the analytics page's figures (operator role): the attempts' aggregates (spec §10) and the retention
and cost tables, over a period or all time, for a policy and a provider. All time is read from the roll-up kept as
the records are written (issue 34); sessions_app.compactions.analytics and .retention say what each figure is."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from compactweb.converters import MAX_ID
from compactweb.roles import IsOperator
from sessions_app.compactions import retention, rolled_up
from sessions_app.compactions.analytics import compaction_analytics
from sessions_app.web.forms import DEFAULT_PERIOD, PERIODS

RETENTION_TABLES = ("strategy", "policy", "model", "day")


class AnalyticsFilterSerializer(serializers.Serializer):
    policy = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, help_text="The policy the attempts ran under."
    )
    provider = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, help_text="The provider the attempts ran under."
    )
    period = serializers.ChoiceField(
        choices=[p for p, _ in PERIODS],
        default=DEFAULT_PERIOD,
        allow_blank=True,
        help_text="The last 1, 7 or 30 days; empty: all time.",
    )


class LatencySerializer(serializers.Serializer):
    p50 = serializers.FloatField(allow_null=True)
    p90 = serializers.FloatField(allow_null=True)
    p99 = serializers.FloatField(allow_null=True)
    count = serializers.IntegerField()


class AnalyticsSerializer(serializers.Serializer):
    period = serializers.CharField()
    attempts = serializers.IntegerField()
    totals = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()),
        help_text="Attempts by value of each dimension.",
    )
    per_day = serializers.DictField(help_text="Per UTC day (oldest first), the same counts as totals.")
    tokens_freed = serializers.IntegerField(
        help_text="Window tokens freed by the compactions installed and not rolled back (imported ones included): "
                  "the compactions `retention` counts, so without a policy or provider it is the sum of its days.")
    tokens_freed_mean = serializers.FloatField(allow_null=True, help_text="tokens_freed per such compaction.")
    failure_rate = serializers.FloatField(allow_null=True)
    latency_ms = LatencySerializer()
    retention = serializers.DictField(
        child=serializers.ListField(child=serializers.DictField()),
        help_text="Retention and cost of the compactions not rolled back, by strategy, policy, model and day.",
    )
    archived_sessions = serializers.IntegerField(
        allow_null=True,
        help_text="All time: how many sessions retention archived (their rows removed) the figures still include "
        "(docs/retention-policy.md). Null for a period: periods count the sessions in the database.",
    )


class Analytics(APIView):
    permission_classes = [IsOperator]

    @extend_schema(
        parameters=[AnalyticsFilterSerializer],
        responses={200: AnalyticsSerializer, 400: OpenApiResponse(description="bad filter")},
    )
    def get(self, request):
        query = AnalyticsFilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        f = query.validated_data
        period = f["period"]
        since = timezone.now() - timedelta(days=int(period)) if period else None
        data = compaction_analytics(policy_id=f.get("policy"), provider_id=f.get("provider"), since=since)
        data["retention"] = {by: retention.retention_rollup(by=by, since=since) for by in RETENTION_TABLES}
        data["archived_sessions"] = None if period else rolled_up.archived_sessions()
        return Response(AnalyticsSerializer({"period": period, **data}).data)
