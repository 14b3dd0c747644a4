from django.contrib import admin, messages
from django.utils.html import format_html

from compactweb import auth_admin
from compactweb.domain_errors import DomainError
from compactweb.read_only_admin import ReadOnlyAdmin
from compactweb.roles import ADMIN, has_role
from sessions_app.archive.services import do_restore_archive
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.models import ArchiveRun, ContextWindow, LiveItem, RolloutLine, Session, SessionArchive

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


@admin.register(SessionArchive)
class SessionArchiveAdmin(ReadOnlyAdmin):
    """Archived sessions (retention, docs/retention-policy.md): where each file is and what it holds; the admin
    role may restore one (an import of its file, checked against its SHA-256)."""

    list_display = ("session_id", "title", "archived_at", "archived_by", "file_name", "file_lines",
                    "compressed_bytes", "export_bytes")
    search_fields = ("title", "thread_id", "file_name")
    list_filter = ("archived_by", "source")
    actions = ["restore"]

    def has_restore_permission(self, request) -> bool:
        return has_role(request.user, ADMIN)

    @admin.action(description="Restore the selected archives (import their files)", permissions=["restore"])
    def restore(self, request, queryset):
        for record in queryset.order_by("pk"):
            try:
                result = do_restore_archive(archive_id=record.pk, actor=request.user)
            except (DomainError, RolloutImportError) as exc:
                self.message_user(request, f"archive {record.pk} ({record.title}) not restored: {exc}",
                                  level=messages.ERROR)
            else:
                self.message_user(request, f"archive {record.pk} restored as session {result.session.pk}")


@admin.register(ArchiveRun)
class ArchiveRunAdmin(ReadOnlyAdmin):
    list_display = ("started_at", "trigger", "dry_run", "due", "archived", "failed", "finished_at")
    list_filter = ("trigger", "dry_run")
