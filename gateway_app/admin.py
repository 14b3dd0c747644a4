"""The gateway in Django's admin (issue 29): routes, and keys that are shown once when created."""

from __future__ import annotations

from django.contrib import admin, messages
from django.forms.models import BaseInlineFormSet

from compactweb.admin_numbers import SeparatedNumbers
from gateway_app.keys import do_create_gateway_key, do_create_user_gateway_key
from gateway_app.models import GatewayAttempt, GatewayKey, GatewayRoute, GatewaySession


class LabelledKeyRows(BaseInlineFormSet):
    """A tabular inline names its columns in the table head only: each row's inputs get a label naming their key,
    so a screen reader does not read unnamed fields (axe-core's critical "label" rule; issue 47)."""

    def add_fields(self, form, index):
        super().add_fields(form, index)
        key = form.instance.client_name or form.instance.prefix or "this key"
        for name, what in (("client_name", "client name"), ("revoked", "revoked"), ("DELETE", "delete")):
            if name in form.fields:
                form.fields[name].widget.attrs["aria-label"] = f"{what}: {key}"


class GatewayKeyInline(admin.TabularInline):
    model = GatewayKey
    formset = LabelledKeyRows
    extra = 0
    fields = ("client_name", "prefix", "revoked", "created", "last_used")
    readonly_fields = ("prefix", "created", "last_used")

    def has_add_permission(self, request, obj=None):
        return False  # keys are created with the "create a key" action, which shows the key once


@admin.register(GatewayRoute)
class GatewayRouteAdmin(SeparatedNumbers, admin.ModelAdmin):
    list_display = ("name", "provider", "policy", "compaction_mode", "compaction_fallback", "requests_per_minute",
                    "allow_user_keys", "pass_client_bearer", "enabled")
    list_filter = ("compaction_mode", "allow_user_keys", "enabled")
    inlines = [GatewayKeyInline]
    actions = ["create_key"]

    def get_inlines(self, request, obj):
        # A route being added has no keys, and keys are never added inline: an empty key table only scrolled
        # sideways at 390 px, out of reach of the keyboard (axe-core's scrollable-region-focusable, serious).
        return self.inlines if obj is not None else []

    @admin.action(description="Create a gateway key for each selected route (shown once)")
    def create_key(self, request, queryset):
        for route in queryset:
            new = do_create_gateway_key(route=route, client_name=f"created by {request.user.get_username()}")
            messages.warning(request, f"Key for route {route.name} (shown only now, store it): {new.key}")


@admin.register(GatewayKey)
class GatewayKeyAdmin(SeparatedNumbers, admin.ModelAdmin):
    list_display = ("client_name", "route", "user", "prefix", "revoked", "created", "last_used")
    list_filter = ("route", "revoked")
    fields = ("route", "user", "client_name", "prefix", "revoked", "created", "last_used")
    readonly_fields = ("prefix", "created", "last_used")

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields + (("route", "user") if obj is not None else ())

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        if obj.route_id is None and obj.user_id is not None:  # a user's own key (the routes that allow them)
            new = do_create_user_gateway_key(user=obj.user, name=obj.client_name)
        else:
            new = do_create_gateway_key(route=obj.route, client_name=obj.client_name)
        obj.pk = new.row.pk
        messages.warning(request, f"The key (shown only now, store it): {new.key}")


@admin.register(GatewaySession)
class GatewaySessionAdmin(SeparatedNumbers, admin.ModelAdmin):
    list_display = ("session", "route", "client_name", "group_key", "requests", "updated")
    list_filter = ("route",)
    readonly_fields = [f.name for f in GatewaySession._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(GatewayAttempt)
class GatewayAttemptAdmin(SeparatedNumbers, admin.ModelAdmin):
    list_display = ("created", "route", "gateway_session", "endpoint", "request_kind", "status", "cut")
    list_filter = ("route", "status", "cut")
    readonly_fields = [f.name for f in GatewayAttempt._meta.fields]

    def has_add_permission(self, request):
        return False
