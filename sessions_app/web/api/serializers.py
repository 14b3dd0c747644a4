"""JSON shapes of the sessions API (design: JSON API contract)."""

from __future__ import annotations

from rest_framework import serializers

from compaction_app.models import CompactionPolicy, Provider
from compactweb.converters import MAX_ID
from sessions_app.models import Session


class SessionCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    provider = serializers.PrimaryKeyRelatedField(queryset=Provider.objects.all())
    policy = serializers.PrimaryKeyRelatedField(queryset=CompactionPolicy.objects.all())
    base_instructions = serializers.CharField(
        required=False, allow_blank=True, default="", trim_whitespace=False,
        help_text="Stored and sent byte for byte (a trailing newline included).",
    )
    initial_context = serializers.JSONField(required=False, default=list, help_text="Responses items.")
    items = serializers.JSONField(required=False, default=list, help_text="Responses items.")
    tools = serializers.JSONField(
        required=False, default=list,
        help_text="Tool specs (Responses `tools`) sent by every turn and remote compaction of the session.",
    )
    parallel_tool_calls = serializers.BooleanField(required=False, default=False)


class AppendItemsSerializer(serializers.Serializer):
    items = serializers.JSONField(help_text="Responses items to append, in order.")
    usage = serializers.DictField(
        required=False, allow_null=True, default=None,
        help_text="Usage of the response that produced the items (input_tokens, output_tokens, total_tokens...).",
    )
    reasoning_included = serializers.BooleanField(required=False, default=False)


# A context window's place in its session's chain of windows: its number, its id, the id of the window it replaced
# (null for the first) and the first window's id; a session shows its current window, a compaction the window it
# opened. (A comment, not a docstring: the schema would give it as the description of every serializer built on it.)
class WindowLineageSerializer(serializers.Serializer):
    window_number = serializers.IntegerField()
    window_id = serializers.CharField()
    previous_window_id = serializers.CharField(allow_null=True)
    first_window_id = serializers.CharField()


class SessionSummarySerializer(WindowLineageSerializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    state = serializers.CharField()
    source = serializers.CharField(
        required=False, help_text="native, imported, followed (a live Codex rollout file: read-only) or replay.")
    thread_id = serializers.CharField()
    provider = serializers.IntegerField()
    policy = serializers.IntegerField()
    model = serializers.CharField()
    tokens_in_window = serializers.IntegerField()
    context_window = serializers.IntegerField()
    usable_context_window = serializers.IntegerField()
    auto_compact_limit = serializers.IntegerField()
    auto_compact_scope = serializers.CharField()
    window_prefill = serializers.IntegerField(allow_null=True)
    compaction_count = serializers.IntegerField()
    live_item_count = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    created_at = serializers.CharField()
    updated_at = serializers.CharField()


class TokenCountingSerializer(serializers.Serializer):
    tokens_in_window = serializers.IntegerField()
    server_reported = serializers.IntegerField(
        allow_null=True, help_text="The newest usage the model's server reported (null when an estimate replaced it).")
    at_seq = serializers.IntegerField(allow_null=True, help_text="The rollout line of that usage.")
    estimated = serializers.IntegerField(help_text="Tokens compactweb counted itself on top of the server's figure.")
    estimator = serializers.CharField(help_text="compactweb's counter (a tiktoken encoding): an estimate for Claude.")
    note = serializers.CharField()


class SessionDetailSerializer(SessionSummarySerializer):
    token_counting = TokenCountingSerializer(
        allow_null=True, required=False,
        help_text="For a Claude Code session (issue 35): which tokens the server reported and which are estimates.")


HISTORY_PAGE_DEFAULT = 500
HISTORY_PAGE_MAX = 1000


SESSION_PAGE_DEFAULT = 100
SESSION_PAGE_MAX = 1000


class SessionListQuerySerializer(serializers.Serializer):
    """A page of `GET /api/v1/sessions`, newest first (issue 34: a year of sessions in one answer). When more
    sessions follow, the answer's `Link` header (rel="next") gives the next page's URL."""

    # an unknown state is a 400 naming the states, not an empty page that reads as "no such sessions" (issue 47)
    state = serializers.ChoiceField(choices=Session.State.values, required=False, allow_blank=True,
                                    help_text="Only this state.")
    before = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                      help_text="The id of the previous page's last session (absent: the newest).")
    limit = serializers.IntegerField(default=SESSION_PAGE_DEFAULT, min_value=1, max_value=SESSION_PAGE_MAX,
                                     help_text=f"Sessions per page, at most {SESSION_PAGE_MAX}.")


class HistoryQuerySerializer(serializers.Serializer):
    """A page of `GET /api/v1/sessions/<id>/history` (issue 27: a 200,000-item history in one answer)."""

    after = serializers.IntegerField(required=False, min_value=-1, max_value=2**31,
                                     help_text="The `next` of the previous page (absent: the first page).")
    limit = serializers.IntegerField(default=HISTORY_PAGE_DEFAULT, min_value=1, max_value=HISTORY_PAGE_MAX,
                                     help_text=f"Items per page, at most {HISTORY_PAGE_MAX}.")


class HistorySerializer(serializers.Serializer):
    items = serializers.ListField(child=serializers.DictField(), help_text="The live history's items, in order.")
    next = serializers.IntegerField(
        allow_null=True, help_text="Pass as `after` for the next page; null: this page ends the history.")
    last_seq = serializers.IntegerField(
        help_text="The session's newest rollout line when the page was read. Appends only add items after the "
                  "last page; if a compaction or rollback ran between two pages (it replaces the history), start "
                  "again from the first page.")


class AppendResultSerializer(serializers.Serializer):
    session = SessionSummarySerializer()
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    appended = serializers.IntegerField()
