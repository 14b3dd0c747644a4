"""Users and groups in the Django admin, without a way up for the admin role (issue 14).

A member of the admin role group (not a superuser) may manage users and groups, but:
- cannot grant superuser status, and cannot change, delete or set the password of a superuser;
- can grant only permissions they hold themselves (to a user or a group), so no group becomes a way to rights the
  admin role does not have (API tokens, deleting rollout records);
- can put a user (themselves included) only into groups whose permissions they hold (issue 27): a group a
  superuser made with more rights is no way up either. A membership the user already has is kept (and may be
  removed), so editing such a user changes nothing the admin did not choose;
- cannot rename or delete the role groups, nor change their permissions (migrate keeps those in step).
Superusers keep the stock admin.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, Permission, User

from compactweb.roles import ROLES


def _held_permission_ids(request) -> set[int]:
    held = request.user.get_all_permissions()
    return {p.pk for p in Permission.objects.select_related("content_type")
            if f"{p.content_type.app_label}.{p.codename}" in held}


def _grantable(request, queryset):
    if request.user.is_superuser:
        return queryset
    return queryset.filter(pk__in=_held_permission_ids(request))


def _joinable_groups(request, queryset, *, member=None):
    """The groups `request.user` may put a user into: those whose every permission it holds, plus the groups
    `member` is in already (kept unless unticked)."""
    if request.user.is_superuser:
        return queryset
    held = _held_permission_ids(request)
    beyond = Group.permissions.through.objects.exclude(permission_id__in=held).values("group_id")
    joinable = queryset.exclude(pk__in=beyond)
    if member is not None and member.pk is not None:
        joinable = joinable | queryset.filter(pk__in=member.groups.values("pk"))
    return joinable.distinct()


class _GrantsOnlyHeldPermissions:
    """The permissions picker (`permissions_field`) offers only what the editing user holds."""

    permissions_field: str

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == self.permissions_field and field is not None:
            field.queryset = _grantable(request, field.queryset)
        return field


class RoleSafeUserAdmin(_GrantsOnlyHeldPermissions, UserAdmin):
    permissions_field = "user_permissions"

    def get_readonly_fields(self, request, obj=None):
        # When a user last signed in and joined are facts, not settings: shown as text, not as the date and time
        # inputs Django's split widget leaves without a label (axe-core's label rule, critical; issue 47).
        fields = [*super().get_readonly_fields(request, obj), "last_login", "date_joined"]
        if not request.user.is_superuser:
            fields.append("is_superuser")
        return fields

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "groups" and field is not None:
            field.queryset = _joinable_groups(request, field.queryset)
        return field

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        groups = form.base_fields.get("groups")
        if groups is not None and obj is not None:
            # a fresh form class per request: the edited user's own groups stay on offer (and stay ticked)
            groups.queryset = _joinable_groups(request, Group.objects.all(), member=obj)
        return form

    def _touches_superuser(self, request, obj) -> bool:
        return obj is not None and obj.is_superuser and not request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return not self._touches_superuser(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not self._touches_superuser(request, obj) and super().has_delete_permission(request, obj)


class RoleSafeGroupAdmin(_GrantsOnlyHeldPermissions, GroupAdmin):
    permissions_field = "permissions"

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.name in ROLES:
            fields.append("name")
            if not request.user.is_superuser:
                fields.append("permissions")
        return fields

    def has_delete_permission(self, request, obj=None):
        return not (obj is not None and obj.name in ROLES) and super().has_delete_permission(request, obj)


def register() -> None:
    for model, model_admin in ((User, RoleSafeUserAdmin), (Group, RoleSafeGroupAdmin)):
        if admin.site.is_registered(model):
            admin.site.unregister(model)
        admin.site.register(model, model_admin)
