"""JSON shapes of the compaction API (design: JSON API contract): the compact request, compactions, attempts."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from compaction_app.engine.vocabulary import MAX_EXTRA_INSTRUCTIONS, STRATEGY_MEMENTO
from compaction_app.models import CompactionPolicy, Phase, Trigger
from sessions_app.compactions.presentation import injection_of
from sessions_app.web.api.serializers import WindowLineageSerializer

STRATEGY_CHOICES = [c for c in CompactionPolicy.Strategy.values if c != CompactionPolicy.Strategy.AUTO]
REQUEST_PHASES = [Phase.PRE_TURN, Phase.MID_TURN, Phase.STANDALONE_TURN]


class CompactRequestSerializer(serializers.Serializer):
    trigger = serializers.ChoiceField(choices=Trigger.values, default=Trigger.MANUAL)
    phase = serializers.ChoiceField(
        choices=REQUEST_PHASES, required=False, allow_null=True, default=None,
        help_text="Needed for trigger auto (pre_turn or mid_turn); manual defaults to standalone_turn.",
    )
    method = serializers.ChoiceField(
        choices=STRATEGY_CHOICES, required=False, allow_null=True, default=None,
        help_text="compactweb's method; null = the policy's choice (auto selection per spec §2.5).",
    )
    strategy = serializers.ChoiceField(
        choices=STRATEGY_CHOICES, required=False, allow_null=True, default=None,
        help_text="Deprecated name of `method` (Codex's own `strategy` is the analytics value `memento`).",
    )
    instructions = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_EXTRA_INSTRUCTIONS,
        help_text="Extra instructions appended to the summarisation prompt (local strategy only).",
    )

    def validate(self, data):
        method, alias = data.get("method"), data.pop("strategy", None)
        if method and alias and method != alias:
            raise serializers.ValidationError({"method": f"method {method!r} and its old name strategy {alias!r} "
                                                         "disagree; send method only"})
        data["method"] = method or alias
        if data["trigger"] == Trigger.AUTO and not data.get("phase"):
            raise serializers.ValidationError({"phase": "an automatic compaction needs a phase: pre_turn or mid_turn"})
        if data["trigger"] == Trigger.AUTO and data.get("phase") == Phase.STANDALONE_TURN:
            raise serializers.ValidationError({"phase": "standalone_turn is the phase of a manual compaction"})
        return data


@extend_schema_field(serializers.CharField(allow_null=True))
class BlankAsNullField(serializers.CharField):
    """A text column whose blank value the API shows as null."""

    def to_representation(self, value):
        return value or None


@extend_schema_field(serializers.CharField())
class MementoField(serializers.Field):
    """Codex's analytics `strategy`: `memento` for every current implementation (spec §10)."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value):
        return STRATEGY_MEMENTO


@extend_schema_field(serializers.IntegerField(allow_null=True))
class UnixSecondsField(serializers.DateTimeField):
    def to_representation(self, value):
        return int(value.timestamp()) if value is not None else None


class HookRunSerializer(serializers.Serializer):
    """A HookRun row."""

    id = serializers.IntegerField()
    hook = serializers.IntegerField(source="hook_id", allow_null=True)
    name = serializers.CharField(source="hook_name")
    event = serializers.CharField()
    status = serializers.CharField()
    stop_reason = BlankAsNullField()
    duration_ms = serializers.IntegerField()
    output = serializers.JSONField()


class AttemptErrorSerializer(serializers.Serializer):
    """An attempt's error fields; null when it has none."""

    kind = serializers.CharField(source="error_kind", allow_null=True)
    http_status = serializers.IntegerField(source="error_http_status", allow_null=True)
    message = serializers.CharField(source="error_message")

    def to_representation(self, attempt):
        if not (attempt.error_kind or attempt.error_message):
            return None
        data = super().to_representation(attempt)
        data["kind"] = data["kind"] or None
        return data


class CodexAnalyticsSerializer(serializers.Serializer):
    """A CompactionAttempt under Codex's `CodexCompactionEvent` field names (spec §10), for comparison with Codex's
    own analytics: `strategy` is `memento`, times are unix seconds."""

    thread_id = serializers.CharField(source="session.thread_id")
    turn_id = BlankAsNullField()
    trigger = serializers.CharField()
    reason = serializers.CharField()
    implementation = serializers.CharField()
    phase = serializers.CharField()
    strategy = MementoField()
    status = serializers.CharField()
    codex_error_kind = BlankAsNullField(source="error_kind")
    codex_error_http_status_code = serializers.IntegerField(source="error_http_status", allow_null=True)
    active_context_tokens_before = serializers.IntegerField(source="tokens_before")
    active_context_tokens_after = serializers.IntegerField(source="tokens_after", allow_null=True)
    retained_image_count = serializers.IntegerField(allow_null=True)
    compaction_summary_tokens = serializers.IntegerField(allow_null=True)
    cached_input_tokens = serializers.IntegerField(allow_null=True)
    started_at = UnixSecondsField()
    completed_at = UnixSecondsField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)


class AttemptSerializer(serializers.Serializer):
    """A CompactionAttempt row with its hook runs and its analytics (spec §10): the API's and the inspector's one
    shape of an attempt."""

    id = serializers.IntegerField()
    session = serializers.IntegerField(source="session_id")
    compaction = serializers.IntegerField(source="compaction_id", allow_null=True)
    item_id = serializers.CharField()
    turn_id = serializers.CharField()
    trigger = serializers.CharField()
    reason = serializers.CharField()
    implementation = serializers.CharField()
    phase = serializers.CharField()
    # compactweb's own choice of method, and Codex's `strategy` analytics field, `memento` for every current
    # implementation (spec §10).
    method = serializers.CharField(source="strategy",
                                   help_text="compactweb's method: local, remote_v1, remote_v2, token_budget, ...")
    strategy = MementoField(help_text="Codex's analytics `strategy`: `memento` (spec §10).")
    status = serializers.CharField()
    error = AttemptErrorSerializer(source="*", allow_null=True)
    tokens_before = serializers.IntegerField(
        help_text="Codex's analytics active_context_tokens_before (spec §10): the server's input tokens for remote v2, "
                  "the trimmed estimate for remote v1/v2 (§6.3), else the meter at the start; differs on purpose "
                  "from the compaction's window tokens_before.")
    tokens_after = serializers.IntegerField(
        allow_null=True, help_text="Codex's analytics active_context_tokens_after: the estimate of the history the "
                                   "compaction built, without items that arrived while it ran.")
    compaction_summary_tokens = serializers.IntegerField(allow_null=True)
    cached_input_tokens = serializers.IntegerField(allow_null=True)
    retained_image_count = serializers.IntegerField(allow_null=True)
    retries = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    hook_runs = HookRunSerializer(many=True)
    analytics = CodexAnalyticsSerializer(source="*", help_text="The attempt under Codex's CodexCompactionEvent "
                                                                "field names (§10).")



class CategoryScoreSerializer(serializers.Serializer):
    kept = serializers.IntegerField()
    total = serializers.IntegerField()
    score = serializers.FloatField(allow_null=True)


class FactSerializer(serializers.Serializer):
    kind = serializers.CharField()
    weight = serializers.IntegerField(default=1, help_text="How much the fact counts in the score (by kind).")
    category = serializers.CharField()
    text = serializers.CharField()
    kept = serializers.BooleanField()
    answer = serializers.CharField(required=False, allow_blank=True,
                                   help_text="Model-judged: the answer line to the fact's own question, when it had one.")
    structural_kept = serializers.BooleanField(required=False,
                                               help_text="Model-judged: the structural check's verdict on this fact.")
    disagrees = serializers.BooleanField(required=False, help_text="Model-judged: the probe and the structural "
                                                                   "check disagree on this fact.")


class RetentionSerializer(serializers.Serializer):
    method = serializers.CharField()
    score = serializers.FloatField(
        allow_null=True, help_text="Weighted share of facts kept; null when nothing left the window or when the "
                                   "window is opaque (an encrypted remote compaction item: not scored).")
    opaque = serializers.BooleanField(default=False, help_text="The window holds an encrypted compaction item: what "
                                      "it remembers is not visible, so the score is not given (docs/retention.md).")
    visible_score = serializers.FloatField(allow_null=True, default=None,
                                           help_text="Weighted share of facts visibly kept (also for opaque windows).")
    kept = serializers.IntegerField()
    total = serializers.IntegerField()
    categories = serializers.DictField(child=CategoryScoreSerializer())
    facts = FactSerializer(many=True)
    tokens_spent = serializers.IntegerField()
    disagreements = serializers.IntegerField(default=0, help_text="Model-judged: facts on which the probes and the "
                                                                  "structural check disagree.")


class CostSerializer(serializers.Serializer):
    """What a compaction cost and saved, read from its row; the net fields only on the detail, which gathers them
    onto the row as `roi` (sessions_app/compactions/roi.py)."""

    tokens_freed = serializers.IntegerField()
    call_tokens = serializers.IntegerField()
    probe_tokens = serializers.IntegerField()
    reread_tokens = serializers.IntegerField()
    # The net (compaction detail only; sessions_app/compactions/roi.py).
    requests_after = serializers.IntegerField(required=False, help_text="Sampling requests that followed it.")
    tokens_saved_over_requests = serializers.IntegerField(required=False)
    net_tokens = serializers.IntegerField(required=False, help_text="saved over requests − call − probes − re-read")
    net_formula = serializers.CharField(required=False, help_text="How the net was computed, with the figures.")
    net_open = serializers.BooleanField(required=False, help_text="The session's newest installed compaction: every "
                                        "later request adds its tokens freed, so the net grows until the next one.")
    price_per_million_tokens = serializers.FloatField(required=False, allow_null=True)
    net_cost_saved = serializers.FloatField(required=False, allow_null=True,
                                            help_text="net_tokens × the provider's price per 1M tokens")

    NET_FIELDS = ("requests_after", "tokens_saved_over_requests", "net_tokens", "net_formula", "net_open",
                  "price_per_million_tokens", "net_cost_saved")

    def to_representation(self, compaction):
        data = {name: self.fields[name].to_representation(getattr(compaction, name))
                for name in ("tokens_freed", "call_tokens", "probe_tokens", "reread_tokens")}
        roi = getattr(compaction, "roi", None) or {}  # a list row has no net: its nullable fields read null
        for name in self.NET_FIELDS:
            value = roi.get(name)
            if value is not None:
                data[name] = self.fields[name].to_representation(value)
            elif self.fields[name].allow_null:
                data[name] = None
        return data


class SessionNetSerializer(serializers.Serializer):
    compactions = serializers.IntegerField()
    net_tokens = serializers.IntegerField()
    net_cost_saved = serializers.FloatField(allow_null=True)


class PromptUsedSerializer(serializers.Serializer):
    """The summarisation prompt a compaction row records; null when it records none."""

    name = serializers.CharField(source="prompt_name", help_text="The default, the policy's compact_prompt, a "
                                 "stored prompt's name, or the retention retry prompt's.")
    version = serializers.CharField(source="prompt_version",
                                    help_text="The first 12 hex digits of the prompt text's SHA-256.")

    def to_representation(self, compaction):
        return super().to_representation(compaction) if compaction.prompt_version else None


@extend_schema_field(serializers.DateTimeField())
class IsoDateTimeField(serializers.DateTimeField):
    """A time as Python's isoformat writes it (`+00:00`, not DRF's `Z`): the compaction shapes' format since the
    first API, kept so no client sees it change."""

    def to_representation(self, value):
        return value.isoformat() if value is not None else None


@extend_schema_field(serializers.ChoiceField(choices=["do_not_inject", "before_last_user_message"]))
class InjectionField(serializers.Field):
    """Where the initial context went (spec §5.3): the row's mode, or its phase's default for an older row."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, compaction):
        return str(injection_of(compaction))


class CompactionSummarySerializer(WindowLineageSerializer):
    """A Compaction row: the API's and the inspector's one shape of a compaction (its list row)."""

    id = serializers.IntegerField()
    session = serializers.IntegerField(source="session_id")
    rollout_seq = serializers.IntegerField()
    item_id = serializers.CharField()
    trigger = serializers.CharField()
    reason = serializers.CharField()
    phase = serializers.CharField()
    implementation = serializers.CharField()
    method = serializers.CharField(source="strategy",
                                   help_text="compactweb's method: local, remote_v1, remote_v2, token_budget, ...")
    strategy = MementoField(help_text="Codex's analytics `strategy`: `memento` (spec §10).")
    injection = InjectionField(help_text="Where the initial context went (spec §5.3).")
    summary = serializers.CharField(allow_blank=True)
    prompt = PromptUsedSerializer(source="*", allow_null=True, help_text="The summarisation prompt the window was "
                                  "made with; null when the method sent none (remote, token budget, plain masking).")
    extra_instructions = BlankAsNullField(
        help_text="The operator's extra instructions appended to the summarisation prompt (a manual local "
                  "compaction); null when none were given. The rollout's `compacted` line records them too.")
    tokens_before = serializers.IntegerField(
        help_text="Window tokens before: the session meter (server usage plus estimates since) when it started.")
    tokens_after = serializers.IntegerField(
        help_text="Window tokens after: the session meter right after it was installed (base instructions plus "
                  "the installed history's estimate, items that arrived meanwhile included).")
    tokens_freed = serializers.IntegerField(help_text="tokens_before − tokens_after (negative: it did not reduce); "
                                                      "the one figure every page shows as freed.")
    previous_window_id = BlankAsNullField()
    rolled_back = serializers.BooleanField()
    created_at = IsoDateTimeField()
    retention = RetentionSerializer(allow_null=True, help_text="Structural retention check (docs/retention.md).")
    probe_retention = RetentionSerializer(allow_null=True, help_text="Model-judged check, when the policy enables it.")
    cost = CostSerializer(source="*")
    flagged = serializers.CharField(allow_blank=True, help_text="Why the compaction was flagged (empty: it was not).")
    inferred = serializers.DictField(
        child=serializers.CharField(), required=False,
        help_text="For an imported compaction: each label inferred from the rollout, with the evidence.",
    )


class CompactionListItemSerializer(CompactionSummarySerializer):
    """The row with what presentation.compaction_listing gathered onto it."""

    message = serializers.CharField(allow_blank=True)
    replacement_history = serializers.ListField(child=serializers.JSONField(), help_text="Responses items.")
    attempts = AttemptSerializer(source="attempt_rows", many=True)


class WindowChangeSerializer(serializers.Serializer):
    kept = serializers.ListField(child=serializers.JSONField())
    left = serializers.ListField(child=serializers.JSONField())
    new = serializers.ListField(child=serializers.JSONField())
    kept_tokens = serializers.IntegerField()
    left_tokens = serializers.IntegerField()
    new_tokens = serializers.IntegerField()


class CompactionDetailSerializer(CompactionListItemSerializer):
    """The row with what presentation.compaction_detail gathered onto it."""

    compacted_item = serializers.JSONField(help_text="The `compacted` line payload without the history (§1.5).")
    replacement_tokens = serializers.ListField(child=serializers.IntegerField())
    before_history = serializers.ListField(child=serializers.JSONField(), help_text="The history right before.")
    before_tokens = serializers.ListField(child=serializers.IntegerField())
    window_change = WindowChangeSerializer()
    hook_runs = HookRunSerializer(source="hook_run_rows", many=True)
    session_net = SessionNetSerializer(required=False, help_text="The session's net over its installed compactions.")
