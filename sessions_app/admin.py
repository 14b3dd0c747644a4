from django.contrib import admin, messages
from django.utils.html import format_html

from compaction_app.engine.alert_delivery import KIND_SEVERITY
from compaction_app.engine.vocabulary import code_label
from compaction_app.models import AlertDelivery, AlertDestination
from compactweb import auth_admin
from compactweb.admin_numbers import SeparatedNumbers
from compactweb.domain_errors import DomainError
from compactweb.read_only_admin import ReadOnlyAdmin
from compactweb.roles import ADMIN, has_role
from sessions_app.archive.services import do_restore_archive
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.compactions import alert_delivery
from sessions_app.models import ArchiveRun, ContextWindow, LiveItem, RolloutLine, Session, SessionArchive

auth_admin.register()  # users and groups without a way up for the admin role (issue 14)


@admin.register(Session)
class SessionAdmin(SeparatedNumbers, admin.ModelAdmin):
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
    list_display = ("session", "number", "window_id", "opened_by_seq", "opened_because", "opened_at")

    @admin.display(description="reason", ordering="reason")
    def opened_because(self, obj: ContextWindow) -> str:
        return code_label(obj.reason)  # session_start -> session start: labels, not codes (issue 47 item 7)


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


@admin.register(AlertDestination)
class AlertDestinationAdmin(admin.ModelAdmin):
    """Where alerts are delivered (issue 45, docs/alerts.md "Delivery"); the admin role configures them and may
    send a test message (the button on a destination's page, or the list's action)."""

    list_display = ("name", "kind", "target", "kinds", "min_severity", "enabled")
    list_filter = ("kind", "enabled", "min_severity")
    list_editable = ("enabled",)
    search_fields = ("name", "url", "recipients")
    actions = ["send_test"]
    fieldsets = ((None, {
        "description": "A Slack-compatible incoming webhook gets a <code>text</code> message; a JSON webhook gets "
                       "the alert as JSON signed with HMAC-SHA256 (header X-Compactweb-Signature over "
                       "<code>timestamp.body</code>, the secret read from the environment variable named here); "
                       "email goes through the server's email settings. Severities: " + ", ".join(
                           f"{kind} {severity}" for kind, severity in KIND_SEVERITY.items()) + ".",
        "fields": ("name", "kind", "url", "url_env", "secret_env", "recipients", "kinds", "min_severity", "timeout_seconds",
                   "enabled"),
    }),)

    @admin.display(description="sent to")
    def target(self, obj: AlertDestination) -> str:
        if obj.kind == AlertDestination.Kind.EMAIL:
            return ", ".join(obj.recipient_list())
        # A URL held in the environment is a secret: its variable is named, never read here.
        return f"the URL in ${obj.url_env}" if obj.url_env else obj.url

    def has_send_test_permission(self, request) -> bool:
        return has_role(request.user, ADMIN)

    def _report_test(self, request, destination: AlertDestination) -> None:
        row = alert_delivery.do_send_test(destination)
        if row.status == AlertDelivery.Status.SENT:
            self.message_user(request, f"test message sent to {destination.name}")
        else:
            self.message_user(request, f"test message to {destination.name} failed: {row.last_error}",
                              level=messages.ERROR)

    @admin.action(description="Send a test message to the selected destinations", permissions=["send_test"])
    def send_test(self, request, queryset):
        for destination in queryset.order_by("pk"):
            self._report_test(request, destination)


@admin.register(AlertDelivery)
class AlertDeliveryAdmin(ReadOnlyAdmin):
    """Every message to a destination, its attempts and last error; filter by status "dead letter" for the ones
    whose attempts are spent. The admin role may retry those."""

    list_display = ("created_at", "destination", "event", "alert", "count", "status", "attempts", "next_attempt_at",
                    "last_error", "sent_at")
    list_filter = ("status", "event", "destination")
    search_fields = ("last_error",)
    actions = ["retry"]

    def has_retry_permission(self, request) -> bool:
        return has_role(request.user, ADMIN)

    @admin.action(description="Retry the selected dead letters", permissions=["retry"])
    def retry(self, request, queryset):
        count = alert_delivery.do_retry_dead(queryset)
        self.message_user(request, f"{count} dead letter(s) offered again")
