from django.contrib import admin
from django.utils.html import format_html

from compactweb import auth_admin
from compactweb.read_only_admin import ReadOnlyAdmin
from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session

auth_admin.register()  # users and groups without a way up for the admin role (issue 14)


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "state", "provider", "policy", "window_number", "compaction_count", "updated_at",
                    "live_view")
    list_filter = ("state", "source", "provider", "policy")
    search_fields = ("title", "thread_id")
    fieldsets = (
        (None, {"fields": ("title", "state", "provider", "policy", "fault_injection")}),
        ("Context", {"fields": ("base_instructions", "initial_context")}),
        (
            "Live state (cached from the rollout)",
            {
                "fields": (
                    "thread_id", "model", "window_number", "window_id", "previous_window_id", "first_window_id",
                    "last_seq", "compaction_count", "reference_context_set", "live_item_count", "meter_usage_total",
                    "meter_since_model", "meter_history_tokens", "meter_prefill",
                )
            },
        ),
    )
    readonly_fields = (
        "thread_id", "model", "window_number", "window_id", "previous_window_id", "first_window_id", "last_seq",
        "compaction_count", "reference_context_set", "live_item_count", "meter_usage_total", "meter_since_model",
        "meter_history_tokens", "meter_prefill", "base_instructions", "initial_context",
    )

    @admin.display(description="")
    def live_view(self, obj: Session):
        return format_html('<a href="/sessions/{}/">live view</a>', obj.pk)

    def has_add_permission(self, request):
        return False  # sessions are created through the API/services so their rollout starts correctly

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(RolloutLine)
class RolloutLineAdmin(ReadOnlyAdmin):
    list_display = ("session", "seq", "kind", "tokens", "timestamp", "actor")
    list_filter = ("kind",)
    search_fields = ("session__title",)


@admin.register(ContextWindow)
class ContextWindowAdmin(ReadOnlyAdmin):
    list_display = ("session", "number", "window_id", "opened_by_seq", "reason", "opened_at")


@admin.register(LiveItem)
class LiveItemAdmin(ReadOnlyAdmin):
    list_display = ("session", "position", "tokens", "source_seq", "model_generated")
