"""Fleet control over the JSON API (operator role): list and start simulated sessions, pause / resume / stop one run
or all of them, and list the scenario library. Thin wrappers around sessions_app.fleet.runtime."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app.models import CompactionPolicy, Provider
from compactweb.api_errors import ApiError
from compactweb.roles import IsOperator
from sessions_app.fleet import runtime as fleet
from sessions_app.models import SimulatorRun
from sessions_app.simulator import list_scenarios
from sessions_app.web.api.lookups import not_found

ACTIONS = {"pause": fleet.do_pause_run, "resume": fleet.do_resume_run, "stop": fleet.do_stop_run}


def _action(name: str):
    """The service behind a fleet action's name in the URL; an unknown name is a 404 in the API's shape."""
    if name not in ACTIONS:
        raise ApiError(status_code=404, code="not_found", message=f"no action {name!r}: pause, resume or stop")
    return ACTIONS[name]


class FleetStartSerializer(serializers.Serializer):
    scenario = serializers.CharField(help_text="A scenario name (GET /scenarios).")
    count = serializers.IntegerField(min_value=1, max_value=fleet.MAX_FLEET_SIZE, default=1)
    provider = serializers.PrimaryKeyRelatedField(queryset=Provider.objects.all())
    policy = serializers.PrimaryKeyRelatedField(queryset=CompactionPolicy.objects.all())
    turns_per_minute = serializers.FloatField(
        required=False, allow_null=True, default=None, min_value=0.001, max_value=fleet.MAX_TURNS_PER_MINUTE,
        help_text="Pacing per session; empty = as fast as possible.",
    )
    loop = serializers.BooleanField(default=False, help_text="Repeat the script (with variations) forever.")
    seed = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0,
                                    max_value=2**62, help_text="Base seed; session i gets seed + i.")
    context_window = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1000,
        help_text="Start the sessions with this window (default: the scenario's suggestion, else the provider's).",
    )

    def validate_scenario(self, value: str) -> str:
        if value not in list_scenarios():
            raise serializers.ValidationError(f"unknown scenario; choose one of {', '.join(list_scenarios())}")
        return value


class RunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    session = serializers.IntegerField()
    title = serializers.CharField()
    scenario = serializers.CharField()
    seed = serializers.IntegerField()
    loop = serializers.BooleanField()
    turns_per_minute = serializers.FloatField(allow_null=True)
    status = serializers.CharField()
    steps_done = serializers.IntegerField()
    position = serializers.IntegerField()
    next_step_at = serializers.CharField(allow_null=True)
    last_error = serializers.CharField(allow_blank=True)
    model = serializers.CharField()
    context_window = serializers.IntegerField()
    window_number = serializers.IntegerField()
    compaction_count = serializers.IntegerField()
    tokens_in_window = serializers.IntegerField()


class FleetStartedSerializer(serializers.Serializer):
    runs = RunSerializer(many=True)


class FleetChangedSerializer(serializers.Serializer):
    changed = serializers.IntegerField()


class ScenarioSerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    turns = serializers.IntegerField()
    tools = serializers.ListField(child=serializers.CharField())
    model = serializers.CharField(allow_null=True)
    context_window = serializers.IntegerField(allow_null=True)
    token_budget = serializers.BooleanField()
    model_switches = serializers.BooleanField()
    fault_plans = serializers.BooleanField()


class FleetList(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses=RunSerializer(many=True))
    def get(self, request):
        status_filter = request.query_params.get("status")
        if status_filter and status_filter not in SimulatorRun.Status.values:
            raise ApiError(status_code=400, code="invalid",
                           message=f"status: one of {', '.join(SimulatorRun.Status.values)}")
        return Response(RunSerializer([fleet.run_summary(r) for r in fleet.list_runs(status=status_filter)], many=True).data)

    @extend_schema(operation_id="fleet_start", request=FleetStartSerializer, responses={201: FleetStartedSerializer})
    def post(self, request):
        data = FleetStartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        runs = fleet.do_start_fleet(actor=request.user, **data.validated_data)
        runs = [fleet.list_runs().get(pk=r.pk) for r in runs]
        return Response(FleetStartedSerializer({"runs": [fleet.run_summary(r) for r in runs]}).data,
                        status=status.HTTP_201_CREATED)


class FleetRunAction(APIView):
    permission_classes = [IsOperator]

    @extend_schema(operation_id="fleet_run_action", request=None, responses=RunSerializer)
    def post(self, request, run_id: int, action: str):
        do_action = _action(action)
        if not SimulatorRun.objects.filter(pk=run_id).exists():
            raise not_found("simulator run", run_id)
        do_action(run=run_id, actor=request.user)
        return Response(RunSerializer(fleet.run_summary(fleet.list_runs().get(pk=run_id))).data)


class FleetAction(APIView):
    permission_classes = [IsOperator]

    @extend_schema(operation_id="fleet_action", request=None, responses=FleetChangedSerializer)
    def post(self, request, action: str):
        return Response(FleetChangedSerializer({"changed": _action(action)(run=None, actor=request.user)}).data)


class ScenarioList(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses=ScenarioSerializer(many=True))
    def get(self, request):
        return Response(ScenarioSerializer([fleet.scenario_summary(name) for name in list_scenarios()], many=True).data)
