"""`POST /api/v1/sessions/<id>/turns`: run one turn against the session's provider (design: JSON API contract).

The turn runs synchronously through the same loop as simulated sessions (sessions_app.turns.loop): pre-turn compaction,
context injection, sampling, mid-turn compaction. A provider or compaction failure is part of the answer
(`status: "failed"` with the error; it is recorded in the rollout); a session held by another turn, compaction or
rollback is 409; an empty input is 400 and records nothing.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from compactweb.roles import IsOperator
from sessions_app.models import Session
from sessions_app.rollout import selectors
from sessions_app.rollout.validation import privileged_settings_paths
from sessions_app.turns.inputs import MAX_INPUT_CHARS, validate_settings_change
from sessions_app.turns.selectors import turn_items
from sessions_app.turns.services import run_turn
from sessions_app.web.api.lookups import not_found
from sessions_app.web.api.serializers import SessionSummarySerializer
from sessions_app.web.instructing import ensure_may_instruct


class StrictCharField(serializers.CharField):
    """A string, and only a string (DRF's CharField would turn 5 into "5")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class TurnInputField(serializers.JSONField):
    """The user input: a string, or a list of Codex content items (checked by the turn service)."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            return StrictCharField(max_length=MAX_INPUT_CHARS, trim_whitespace=False).run_validation(data)
        if not isinstance(data, list):
            self.fail("invalid")
        return data


class TurnRequestSerializer(serializers.Serializer):
    input = TurnInputField(help_text="The user message of the turn: a string, or a list of content items "
                                     "(`input_text` {text}, `input_image` {image_url, detail?}).")
    settings = serializers.JSONField(
        required=False, default=None,
        help_text="A settings change the turn carries: any of cwd, approval_policy, sandbox_policy, model. "
                  "Recorded as Codex does: a context-update message for what changed, then the turn_context.",
    )


class TurnErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class TurnCompactionSerializer(serializers.Serializer):
    reason = serializers.CharField()
    phase = serializers.CharField()
    ok = serializers.BooleanField()
    error = serializers.CharField(allow_blank=True)


class TurnResultSerializer(serializers.Serializer):
    turn_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["completed", "failed"])
    error = TurnErrorSerializer(allow_null=True)
    user_input_recorded = serializers.BooleanField()
    items = serializers.ListField(child=serializers.DictField(), help_text="Items the turn appended, in order.")
    final_message = serializers.CharField(allow_blank=True)
    sampling_requests = serializers.IntegerField()
    tool_calls = serializers.IntegerField()
    compactions = TurnCompactionSerializer(many=True)
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    session = SessionSummarySerializer()


class SessionTurns(APIView):
    permission_classes = [IsOperator]

    @extend_schema(request=TurnRequestSerializer, responses={200: TurnResultSerializer})
    def post(self, request, pk: int):
        data = TurnRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            # A malformed change is a 400 before the role question; a valid one that would write the caller's
            # text into a developer message needs the support role (sessions_app.web.instructing).
            change = validate_settings_change(data.validated_data.get("settings"))
            ensure_may_instruct(request.user, privileged_settings_paths(change))
            result = run_turn(session_id=pk, user_input=data.validated_data["input"], actor=request.user,
                              settings=data.validated_data.get("settings"))
        except Session.DoesNotExist:
            raise not_found("session", pk) from None
        body = {
            "turn_id": result.turn_id,
            "status": result.status,
            "error": {"code": result.error_code, "message": result.error} if not result.ok else None,
            "user_input_recorded": result.user_input_recorded,
            "items": turn_items(session_id=pk, first_seq=result.first_seq, last_seq=result.last_seq),
            "final_message": result.final_message,
            "sampling_requests": result.sampling_requests,
            "tool_calls": result.tool_calls,
            "compactions": [vars(c) for c in result.compactions],
            "first_seq": result.first_seq,
            "last_seq": result.last_seq,
            "session": selectors.session_summary(session=selectors.get_session(session_id=pk)),
        }
        return Response(TurnResultSerializer(body).data)
