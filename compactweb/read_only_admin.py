"""The admin of rows only services write (the rollout, windows, compaction records, alerts): visible, never added,
changed or deleted by hand. Both apps' admins use it."""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
