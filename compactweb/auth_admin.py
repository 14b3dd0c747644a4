"""Users and groups in the Django admin, without a way up for the admin role (issue 14).

A member of the admin role group (not a superuser) may manage users and groups, but:
- cannot grant superuser status, and cannot change, delete or set the password of a superuser;
- can grant only permissions they hold themselves (to a user or a group), so no group becomes a way to rights the
  admin role does not have (API tokens, deleting rollout records);
- cannot rename or delete the role groups, nor change their permissions (migrate keeps those in step).
Superusers keep the stock admin.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, Permission, User

from compactweb.roles import ROLES


def _grantable(request, queryset):
    if request.user.is_superuser:
        return queryset
    held = request.user.get_all_permissions()
    ids = [p.pk for p in Permission.objects.select_related("content_type")
           if f"{p.content_type.app_label}.{p.codename}" in held]
    return queryset.filter(pk__in=ids)


class RoleSafeUserAdmin(UserAdmin):
    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields.append("is_superuser")
        return fields

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "user_permissions" and field is not None:
            field.queryset = _grantable(request, field.queryset)
        return field

    def _touches_superuser(self, request, obj) -> bool:
        return obj is not None and obj.is_superuser and not request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return not self._touches_superuser(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not self._touches_superuser(request, obj) and super().has_delete_permission(request, obj)


class RoleSafeGroupAdmin(GroupAdmin):
    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.name in ROLES:
            fields.append("name")
            if not request.user.is_superuser:
                fields.append("permissions")
        return fields

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "permissions" and field is not None:
            field.queryset = _grantable(request, field.queryset)
        return field

    def has_delete_permission(self, request, obj=None):
        return not (obj is not None and obj.name in ROLES) and super().has_delete_permission(request, obj)


def register() -> None:
    for model, model_admin in ((User, RoleSafeUserAdmin), (Group, RoleSafeGroupAdmin)):
        if admin.site.is_registered(model):
            admin.site.unregister(model)
        admin.site.register(model, model_admin)
