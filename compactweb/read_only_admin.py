"""The admin of rows only services write (the rollout, windows, compaction records, alerts): visible, never added,
changed or deleted by hand; and of settings kept in one row. Both apps' admins use it."""

from __future__ import annotations

from django.contrib import admin
from django.shortcuts import redirect

from compactweb.admin_numbers import SeparatedNumbers


class ReadOnlyAdmin(SeparatedNumbers, admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class SingleRowAdmin(admin.ModelAdmin):
    """The admin of settings kept in one row (compactweb.model_bases.SingleRowSettings): never added or deleted,
    and the list opens the row itself."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def changelist_view(self, request, extra_context=None):
        opts = self.model._meta
        return redirect(f"admin:{opts.app_label}_{opts.model_name}_change", self.model.current().pk)
