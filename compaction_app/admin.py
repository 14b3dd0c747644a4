"""The Django admin for configuration (providers, prompts, hooks, policies) and the read-only compaction records.

Each fieldset says which Codex settings it mirrors (spec §12); field help texts come from the models. The policy
form shows, read-only, the auto-compact limit each provider will actually use (the configured value clamped to 90%
of that provider's window in the total scope, spec §2.2), so a limit above the window is accepted but its effect is
visible. Policy and provider changes are recorded in the audit log (AuditedAdminMixin).
"""

from django import forms
from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from compaction_app.config_audit import AuditedAdminMixin
from compaction_app.engine import thresholds
from compaction_app.engine.prompts import prompt_version
from compaction_app.engine.vocabulary import code_label
from compaction_app.limits import auto_compact_limit
from compaction_app.models import (
    Alert,
    AlertSettings,
    Compaction,
    CompactionAttempt,
    CompactionPolicy,
    Hook,
    HookRun,
    Prompt,
    Provider,
    RetentionSettings,
)
from compactweb.admin_numbers import SeparatedNumbers
from compactweb.read_only_admin import ReadOnlyAdmin, SingleRowAdmin


@admin.register(Provider)
class ProviderAdmin(SeparatedNumbers, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ("name", "model", "base_url", "wire_api", "context_window", "usable_window", "remote_compaction",
                    "encoding")
    list_filter = ("wire_api", "remote_compaction", "encoding", "supports_reasoning")
    search_fields = ("name", "model", "base_url")
    readonly_fields = ("usable_window", "default_auto_compact_limit")
    fieldsets = (
        ("Endpoint", {
            "description": "Codex: model_providers.&lt;id&gt; and model. Use the literal base URL "
                           "<code>embedded</code> for the built-in simulated model. The API key is never stored: "
                           "name the environment variable that holds it.",
            "fields": ("name", "base_url", "wire_api", "model", "fallback_model", "api_key_env", "header_envs"),
        }),
        ("Context window", {
            "description": "Codex model metadata (spec §2.2): the usable window is the context window times the "
                           "effective percent; the default auto-compact limit is 90% of the context window.",
            "fields": ("context_window", "effective_context_window_percent", "usable_window",
                       "default_auto_compact_limit", "encoding"),
        }),
        ("Compaction support", {
            "description": "Which server-side compaction the provider offers decides the strategy Codex selects "
                           "(spec §2.5); the compatibility hash triggers comp_hash_changed compactions (§2.4).",
            "fields": ("remote_compaction", "supports_reasoning", "supports_images", "comp_hash"),
        }),
        ("Network and retries", {
            "description": "Codex: stream_idle_timeout_ms, stream_max_retries and request_max_retries (spec §6.2).",
            "fields": ("connect_timeout", "read_timeout", "stream_max_retries", "request_max_retries"),
        }),
    )

    @admin.display(description="usable window")
    def usable_window(self, obj: Provider) -> str:
        return f"{obj.usable_context_window:,}" if obj.pk else "–"

    @admin.display(description="default auto-compact limit")
    def default_auto_compact_limit(self, obj: Provider) -> str:
        return f"{thresholds.auto_compact_limit(obj.context_window, None):,}" if obj.pk else "–"


@admin.register(Prompt)
class PromptAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "length", "used_by", "updated")
    search_fields = ("name", "text")
    readonly_fields = ("version", "used_by")
    fieldsets = ((None, {
        "description": "A summarisation prompt for local compaction (Codex: experimental_compact_prompt_file). "
                       "A policy uses either its own compact_prompt or one of these, not both.",
        "fields": ("name", "text", "version", "used_by"),
    }),)

    @admin.display(description="version")
    def version(self, obj: Prompt) -> str:
        """What a compaction records as this prompt's version (its inspector shows it)."""
        return prompt_version(obj.text) if obj.pk else "–"

    @admin.display(description="characters")
    def length(self, obj: Prompt) -> str:
        return f"{len(obj.text):,}"

    @admin.display(description="used by policies")
    def used_by(self, obj: Prompt) -> str:
        names = [p.name for p in obj.policies.all()] if obj.pk else []
        return ", ".join(names) or "–"


@admin.register(Hook)
class HookAdmin(admin.ModelAdmin):
    list_display = ("name", "event", "kind", "matcher", "target", "timeout_seconds", "enabled")
    list_filter = ("event", "kind", "matcher", "enabled")
    list_editable = ("enabled",)
    search_fields = ("name", "target")

    def get_changelist_form(self, request, **kwargs):
        # The list's "enabled" checkboxes get a label naming their hook: Django draws them without one, which
        # a screen reader reads as an unnamed checkbox (axe-core's critical "label" rule; issue 47).
        base = super().get_changelist_form(request, **kwargs)

        class LabelledHookForm(base):
            def __init__(self, *args, **form_kwargs):
                super().__init__(*args, **form_kwargs)
                name = self.instance.name if self.instance.pk else "new hook"
                self.fields["enabled"].widget.attrs["aria-label"] = f"{name}: enabled"

        return LabelledHookForm
    fieldsets = ((None, {
        "description": "Codex PreCompact / PostCompact hooks (spec §7): a PreCompact hook can stop the "
                       "compaction; the matcher selects manual or auto triggers. A callable is a dotted Python "
                       "path; a webhook receives a JSON POST.",
        "fields": ("name", "event", "matcher", "kind", "target", "timeout_seconds", "enabled"),
    }),)


# Which compaction methods read each policy field: shown beside the field (its help text), so an admin can tell a
# setting that does nothing under the chosen strategy (issue 33: the prompt never applies to remote compaction).
EVERY_METHOD = "every method"
LOCAL_SUMMARY = "local summarisation, and masking's summarising hybrid"
POLICY_FIELD_USERS: dict[str, str] = {
    "strategy": EVERY_METHOD,
    "remote_compaction_v2": "strategy auto only (picks remote v2 over v1)",
    "token_budget": "strategy auto only (picks token-budget new windows)",
    "auto_compact_token_limit": EVERY_METHOD,
    "auto_compact_scope": EVERY_METHOD,
    "token_counter": EVERY_METHOD,
    "compact_prompt": f"{LOCAL_SUMMARY} — never remote v1/v2, token budget or plain masking (they send no prompt)",
    "prompt": f"{LOCAL_SUMMARY} — never remote v1/v2, token budget or plain masking (they send no prompt)",
    "user_message_budget": LOCAL_SUMMARY,
    "retained_message_budget": "remote v2 only",
    "stream_max_retries": "local summarisation (its stream retries) and remote v2 (at most 2)",
    "request_max_retries": "remote v1 (its HTTP request retries, 5xx and transport errors)",
    "fallback_model": "none of the methods at present: the previous-model fallback (spec §6.4, remote v1 and v2) "
                      "retries with the session's current model",
    "masking_keep_turns": "observation masking only",
    "masking_keep_tokens": "observation masking only",
    "masking_summarise": "observation masking only",
    "retention_probes": EVERY_METHOD,
    "retention_flag_below": EVERY_METHOD,
    "retention_retry_prompt": "local summarisation only (strategy local; not masking's hybrid)",
    "pin_mode": EVERY_METHOD,
    "pin_budget_tokens": EVERY_METHOD,
    "hooks": EVERY_METHOD,
}


def _sessions_that_can_run(policy: CompactionPolicy):
    """The policy's sessions that are not stopped or failed: a change reaches their next compaction (the State
    vocabulary is the session model's, read through the relation: compaction_app does not import sessions_app)."""
    state = policy.sessions.model.State
    return policy.sessions.exclude(state__in=(state.STOPPED, state.FAILED))


class CompactionPolicyForm(forms.ModelForm):
    """The policy form, which asks before a change reaches sessions that can still run (issue 47)."""

    apply_to_sessions = forms.BooleanField(
        required=False, label="Apply to the sessions using it",
        help_text="A change governs their next compactions; saving a policy that sessions can still use asks for "
                  "this tick.")

    class Meta:
        model = CompactionPolicy
        fields = ("name",)  # the admin's fieldsets choose the fields the form shows

    def clean(self):
        cleaned = super().clean()
        changed = [name for name in self.changed_data if name != "apply_to_sessions"]
        if self.instance.pk and changed and not cleaned.get("apply_to_sessions"):
            reached = _sessions_that_can_run(self.instance)
            count = reached.count()
            if count:
                running = reached.filter(state=self.instance.sessions.model.State.RUNNING).count()
                raise forms.ValidationError(
                    f"This change reaches {count:,} session{'s' if count != 1 else ''} using this policy "
                    f"({running:,} running now): their next compactions follow it. Tick \"Apply to the sessions "
                    "using it\" to save.", code="reaches_sessions")
        return cleaned


@admin.register(CompactionPolicy)
class CompactionPolicyAdmin(AuditedAdminMixin, admin.ModelAdmin):
    form = CompactionPolicyForm
    # Short columns, so the list fits beside the filter sidebar at 1280 px; the long labels are in the form.
    list_display = ("name", "method", "threshold", "budgets", "session_count")
    list_filter = ("strategy", "auto_compact_scope", "token_counter", "token_budget", "remote_compaction_v2")
    search_fields = ("name",)
    # A plain multiple select for the hooks: the admin's two-box filter widget puts an aria-label on a bare span
    # (axe: aria-prohibited-attr, serious), and a policy's hooks are few.
    readonly_fields = ("effective_limits",)
    fieldsets = (
        ("Strategy", {
            "description": "Which compaction implementation runs. <em>auto</em> follows Codex's selection "
                           "(spec §2.5): remote v2 or v1 when the provider supports it, else local summarisation; "
                           "token budget opens new windows instead (features.token_budget).",
            "fields": ("name", "strategy", "remote_compaction_v2", "token_budget"),
        }),
        ("Threshold", {
            "description": "Codex: model_auto_compact_token_limit and its scope (spec §2.2-§2.3). Any value is "
                           "accepted; in the total scope a value above 90% of a provider's window is clamped — the "
                           "read-only table shows the limit each provider will really use.",
            "fields": ("auto_compact_token_limit", "auto_compact_scope", "effective_limits", "token_counter"),
        }),
        ("Summarisation prompt (local summarisation only)", {
            "description": "Codex: compact_prompt, or experimental_compact_prompt_file (a stored prompt). "
                           "Setting both is refused (spec §12).",
            "fields": ("compact_prompt", "prompt"),
        }),
        ("Budgets", {
            "description": "Token budgets of what compaction keeps: user messages kept by local compaction "
                           "(COMPACT_USER_MESSAGE_MAX_TOKENS, §5.1) and messages retained by remote v2 (§5.4). "
                           "Negative budgets are refused.",
            "fields": ("user_message_budget", "retained_message_budget"),
        }),
        ("Retries and fallback", {
            "description": "Blank values use the provider's own settings (spec §6.2).",
            "fields": ("stream_max_retries", "request_max_retries", "fallback_model"),
        }),
        ("Observation masking", {
            "description": "compactweb's fifth method (strategy masking): tool outputs older than the recency window "
                           "become placeholders, no model call; the hybrid summarises what masking leaves when it is "
                           "not enough (docs/retention.md).",
            "fields": ("masking_keep_turns", "masking_keep_tokens", "masking_summarise"),
        }),
        ("Retention and pins", {
            "description": "The structural retention check runs after every compaction; the model-judged probes "
                           "cost tokens. A compaction is flagged below the threshold or when it loses a pin.",
            "fields": ("retention_probes", "retention_flag_below", "retention_retry_prompt", "pin_mode", "pin_budget_tokens"),
        }),
        ("Hooks", {"fields": ("hooks",)}),
    )

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        users = POLICY_FIELD_USERS.get(db_field.name)
        if field is not None and users:
            field.help_text = f"{field.help_text} Used by: {users}.".strip()
        return field

    @admin.display(description="strategy", ordering="strategy")
    def method(self, obj: CompactionPolicy) -> str:
        extras = [name for name, on in (("token budget", obj.token_budget), ("v2", obj.remote_compaction_v2)) if on]
        return " + ".join([obj.strategy, *extras])

    @admin.display(description="auto-compact limit")
    def threshold(self, obj: CompactionPolicy) -> str:
        limit = f"{obj.auto_compact_token_limit:,}" if obj.auto_compact_token_limit is not None else "window default"
        return f"{limit} ({obj.auto_compact_scope})"

    @admin.display(description="budgets (user / retained)")
    def budgets(self, obj: CompactionPolicy) -> str:
        return f"{obj.user_message_budget:,} / {obj.retained_message_budget:,}"

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        using = obj.sessions.count() if obj is not None else 0
        if not using:
            return fieldsets
        reached = _sessions_that_can_run(obj).count()
        return (("Sessions using it", {
            "description": format_html(
                # the link in a block of its own: a link inside running text must be told apart by more than its
                # colour (axe: link-in-text-block), and the admin's links are not underlined
                '{} session{} use this policy, {} of them can still run. A change governs their next compactions.'
                '<p><a href="{}?policy={}">See them on the fleet board</a></p>',
                f"{using:,}", "s" if using != 1 else "", f"{reached:,}",
                reverse("fleet"), obj.pk),
            "fields": ("apply_to_sessions",),
        }), *fieldsets)

    def get_queryset(self, request):
        # The list's session column: one COUNT per page in the query, not one query per row.
        return super().get_queryset(request).annotate(sessions_using=Count("sessions"))

    @admin.display(description="sessions", ordering="sessions_using")
    def session_count(self, obj: CompactionPolicy) -> str:
        count = obj.sessions_using
        if not count:
            return "0"
        return format_html('<a href="{}?policy={}" title="the sessions using it, on the fleet board">{}</a>',
                           reverse("fleet"), obj.pk, f"{count:,}")

    @admin.display(description="effective auto-compact limit")
    def effective_limits(self, obj: CompactionPolicy):
        """The limit each provider uses with this policy (spec §2.2: total scope clamps to 90% of the window)."""
        if not obj.pk:
            return "Shown after the policy is saved."
        rows = []
        for provider in Provider.objects.order_by("name"):
            limit = auto_compact_limit(provider=provider, policy=obj)
            clamped = obj.auto_compact_token_limit is not None and limit != obj.auto_compact_token_limit
            note = " (clamped to 90% of the window)" if clamped else ""
            rows.append((provider.name, f"{provider.context_window:,}", f"{limit:,}" if limit else "–", note))
        if not rows:
            return "No providers yet."
        body = format_html_join(
            "", "<tr><td>{}</td><td>window {}</td><td><strong>{}</strong>{}</td></tr>", rows
        )
        return format_html('<table class="effective-limits">{}</table>', body)


@admin.register(Compaction)
class CompactionAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "trigger", "reason", "phase", "implementation", "tokens_before",
                    "tokens_after", "window_number", "rolled_back", "created_at", "inspect")
    list_filter = ("trigger", "reason", "phase", "implementation", "strategy", "rolled_back")
    search_fields = ("session__title", "item_id", "window_id")
    date_hierarchy = "created_at"

    @admin.display(description="")
    def inspect(self, obj: Compaction):
        return format_html('<a href="/compactions/{}/">inspect</a>', obj.pk)


class ErrorKindFilter(admin.AllValuesFieldListFilter):
    """The error kinds attempts failed with, in words; the attempts that did not fail (no kind, "") are "none", not
    an empty link a screen reader cannot name (axe-core's link-name, serious)."""

    def choices(self, changelist):
        kinds = {str(value) for value in self.lookup_choices if value is not None}
        for choice in super().choices(changelist):
            if choice["display"] == "":
                choice["display"] = "none (did not fail)"
            elif choice["display"] in kinds:
                choice["display"] = code_label(choice["display"])
            yield choice


@admin.register(CompactionAttempt)
class CompactionAttemptAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "trigger", "reason", "implementation", "phase", "status", "error_kind",
                    "retries", "duration_ms", "started_at")
    list_filter = ("status", "trigger", "reason", "implementation", "phase", ("error_kind", ErrorKindFilter))
    search_fields = ("session__title", "error_message")
    date_hierarchy = "started_at"


@admin.register(HookRun)
class HookRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "attempt", "hook_name", "event", "status", "duration_ms", "created_at")
    list_filter = ("event", "status")
    search_fields = ("hook_name", "stop_reason")


@admin.register(AlertSettings)
class AlertSettingsAdmin(SingleRowAdmin):
    """The one row of alert thresholds (issue 18): storms, loops, re-reads, failure streaks, which kinds pause."""

    list_display = ("__str__", "storm_count", "storm_minutes", "loop_turns", "reread_turns", "failure_streak",
                    "pause_on")


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "session", "message", "count", "paused", "acknowledged_by")
    list_filter = ("kind", "paused")


@admin.register(RetentionSettings)
class RetentionSettingsAdmin(AuditedAdminMixin, SingleRowAdmin):
    """The one row of the data-retention policy (issue 34, docs/retention-policy.md): whether ended sessions are
    archived to files and removed, after how many idle days, how many per run and how often. Admin role only
    (compaction_app is the admin role's configuration); each change is in the audit log."""

    list_display = ("__str__", "enabled", "archive_after_days", "max_sessions_per_run", "run_every_hours",
                    "last_run_at")
    readonly_fields = ("last_run_at",)
