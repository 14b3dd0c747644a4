from django.contrib import admin

from compaction_app.models import (
    Compaction,
    CompactionAttempt,
    CompactionPolicy,
    Hook,
    HookRun,
    Prompt,
    Provider,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by the compaction service: inspectable, never edited by hand."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    list_display = ("name", "base_url", "wire_api", "model", "context_window", "remote_compaction")
    search_fields = ("name", "model")
    fieldsets = (
        (None, {"fields": ("name", "base_url", "wire_api", "model", "fallback_model", "api_key_env")}),
        ("Context window", {"fields": ("context_window", "effective_context_window_percent", "encoding")}),
        ("Compaction", {"fields": ("remote_compaction", "supports_reasoning", "comp_hash")}),
        ("Network", {"fields": ("connect_timeout", "read_timeout", "stream_max_retries", "request_max_retries")}),
    )


@admin.register(Prompt)
class PromptAdmin(admin.ModelAdmin):
    list_display = ("name", "updated")
    search_fields = ("name", "text")


@admin.register(Hook)
class HookAdmin(admin.ModelAdmin):
    list_display = ("name", "event", "kind", "matcher", "enabled")
    list_filter = ("event", "kind", "enabled")
    fieldsets = ((None, {"fields": ("name", "event", "kind", "target", "matcher", "timeout_seconds", "enabled")}),)


@admin.register(CompactionPolicy)
class CompactionPolicyAdmin(admin.ModelAdmin):
    list_display = ("name", "strategy", "auto_compact_token_limit", "auto_compact_scope", "token_counter")
    filter_horizontal = ("hooks",)
    fieldsets = (
        (None, {"fields": ("name", "strategy", "remote_compaction_v2", "token_budget")}),
        ("Threshold", {"fields": ("auto_compact_token_limit", "auto_compact_scope", "token_counter")}),
        ("Summarisation prompt (local only)", {"fields": ("compact_prompt", "prompt")}),
        ("Budgets", {"fields": ("user_message_budget", "retained_message_budget")}),
        ("Retries and fallback", {"fields": ("stream_max_retries", "request_max_retries", "fallback_model")}),
        ("Hooks", {"fields": ("hooks",)}),
    )


@admin.register(Compaction)
class CompactionAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "trigger", "reason", "phase", "implementation", "tokens_before",
                    "tokens_after", "window_number", "rolled_back", "created_at")
    list_filter = ("trigger", "reason", "implementation", "rolled_back")


@admin.register(CompactionAttempt)
class CompactionAttemptAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "trigger", "implementation", "phase", "status", "error_kind", "duration_ms",
                    "started_at")
    list_filter = ("status", "trigger", "implementation", "phase")


@admin.register(HookRun)
class HookRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "attempt", "hook_name", "event", "status", "duration_ms", "created_at")
    list_filter = ("event", "status")
