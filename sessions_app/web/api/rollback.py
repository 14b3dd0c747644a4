"""JSON API for undoing compactions and rolling back turns (support role): thin wrappers around
sessions_app.compactions.rollback."""

from __future__ import annotations

from contextlib import contextmanager

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app.models import Compaction
from compactweb.api_errors import ApiError
from compactweb.roles import IsSupport
from sessions_app.codex_rollout import ThreadRollbackError
from sessions_app.compactions import rollback
from sessions_app.web.api.compaction_serializers import IsoDateTimeField
from sessions_app.web.api.lookups import found, require_session


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class RollbackRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, help_text="Why, for the audit log and the rollout (required).")
    expect_undoes = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, default=list,
        help_text="The later compactions the rollback also undoes, by id, exactly (see GET or dry_run): a rollback "
                  "that would undo any other set is refused with 409 undoes_not_confirmed and the list.")
    dry_run = serializers.BooleanField(
        required=False, default=False,
        help_text="Answer what the rollback would do (or the refusal it would meet) and write nothing.")


class ThreadRollbackSerializer(ReasonSerializer):
    num_turns = serializers.IntegerField(help_text="How many of the last user turns to drop; must be >= 1.")


class CompactionRefSerializer(serializers.Serializer):
    """A Compaction row named by a rollback (one it also undoes)."""

    id = serializers.IntegerField()
    rollout_seq = serializers.IntegerField()
    window_number = serializers.IntegerField()
    window_id = serializers.CharField()
    trigger = serializers.CharField()
    strategy = serializers.CharField(help_text="compactweb's method (the compaction's `method`).")
    created_at = IsoDateTimeField(allow_null=True)


@contextmanager
def refusal_named():
    """A refusal that lists the later compactions a rollback would undo names them in their API shape."""
    try:
        yield
    except rollback.RollbackRefused as exc:
        if "undoes" in exc.extra:
            exc.extra["undoes"] = CompactionRefSerializer(exc.extra["undoes"], many=True).data
        raise


class RollbackResultSerializer(serializers.Serializer):
    session = serializers.IntegerField()
    rollout_seq = serializers.IntegerField(help_text="Seq of the rollback / redo line appended to the rollout.")
    kind = serializers.CharField()
    source = serializers.CharField()
    compaction = serializers.IntegerField(allow_null=True)
    undoes = CompactionRefSerializer(many=True, help_text="Later compactions this rollback also undid.")
    removed_count = serializers.IntegerField()
    live_item_count = serializers.IntegerField()
    tokens_in_window = serializers.IntegerField()
    window_number = serializers.IntegerField()
    window_id = serializers.CharField()


class RollbackPreviewSerializer(serializers.Serializer):
    compaction = serializers.IntegerField()
    rolled_back = serializers.BooleanField()
    undoes = CompactionRefSerializer(many=True)
    items_before = serializers.IntegerField()
    window_tokens_before = serializers.IntegerField(
        help_text="The compaction's window tokens before (the inspector's figure: the meter when it started).")
    restored_tokens_estimate = serializers.IntegerField(
        help_text="What the meter reads right after the rollback: base instructions plus each restored item's "
                  "estimate (no server usage reading yet), so it differs from window_tokens_before.")
    window_number_before = serializers.IntegerField()


class RollbackDryRunSerializer(RollbackPreviewSerializer):
    dry_run = serializers.BooleanField(help_text="Always true: nothing was written.")


def _compaction_or_404(pk: int) -> Compaction:
    return found("compaction", pk, lambda: Compaction.objects.select_related("session").get(pk=pk))


def _reason(request) -> str:
    data = ReasonSerializer(data=request.data if isinstance(request.data, dict) else {})
    data.is_valid(raise_exception=True)
    return data.validated_data["reason"]


class CompactionRollback(APIView):
    """GET: what a rollback would undo. POST: restore the exact pre-compaction history (support role)."""

    permission_classes = [IsSupport]

    @extend_schema(responses=RollbackPreviewSerializer)
    def get(self, request, pk: int):
        return Response(RollbackPreviewSerializer(rollback.rollback_preview(_compaction_or_404(pk))).data)

    @extend_schema(request=RollbackRequestSerializer, responses=PolymorphicProxySerializer(
        component_name="RollbackAnswer", serializers=[RollbackResultSerializer, RollbackDryRunSerializer],
        resource_type_field_name=None))
    def post(self, request, pk: int):
        compaction = _compaction_or_404(pk)
        data = RollbackRequestSerializer(data=request.data if isinstance(request.data, dict) else {})
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        with refusal_named():
            if asked["dry_run"]:
                would = rollback.check_rollback(compaction_id=compaction.pk, expect_undoes=asked["expect_undoes"])
                return Response(RollbackDryRunSerializer({**would, "dry_run": True}).data)
            result = rollback.do_rollback_compaction(compaction_id=compaction.pk, actor=request.user,
                                                     reason=asked["reason"], expect_undoes=asked["expect_undoes"])
        return Response(RollbackResultSerializer(result.as_dict()).data)


class CompactionRedo(APIView):
    """Re-apply a rolled-back compaction exactly as recorded (support role)."""

    permission_classes = [IsSupport]

    @extend_schema(request=ReasonSerializer, responses=RollbackResultSerializer)
    def post(self, request, pk: int):
        return _history_change(request, pk, rollback.do_redo_compaction)


def _history_change(request, pk: int, change) -> Response:
    """Roll a compaction back or redo it (`change`), answered with its result or 409 with the refusal."""
    compaction = _compaction_or_404(pk)
    reason = _reason(request)
    result = change(compaction_id=compaction.pk, actor=request.user, reason=reason)
    return Response(RollbackResultSerializer(result.as_dict()).data)


class SessionThreadRollback(APIView):
    """Drop the last N user turns (spec §8.3, support role)."""

    permission_classes = [IsSupport]

    @extend_schema(request=ThreadRollbackSerializer, responses=RollbackResultSerializer)
    def post(self, request, pk: int):
        require_session(pk)
        data = ThreadRollbackSerializer(data=request.data if isinstance(request.data, dict) else {})
        data.is_valid(raise_exception=True)
        try:
            result = rollback.do_thread_rollback(
                session_id=pk, num_turns=data.validated_data["num_turns"], actor=request.user,
                reason=data.validated_data["reason"],
            )
        except ThreadRollbackError as exc:
            raise ApiError(status_code=400, code=exc.codex_error_info, message=str(exc)) from None
        return Response(RollbackResultSerializer(result.as_dict()).data)
