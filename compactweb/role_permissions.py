"""Django-admin permissions of the admin role, kept in step with the models after every migrate."""

from __future__ import annotations

from compactweb.roles import ADMIN

# The admin role configures everything (design): full rights on configuration and users, read-only on records.
# No rights on API tokens (knox): they are stored hashed and issued to their owner only (issue 14).
FULL_APPS = ("compaction_app", "auth")
VIEW_APPS = ("sessions_app",)


def grant_admin_permissions(sender=None, using="default", **kwargs) -> None:
    from django.contrib.auth.models import Group, Permission

    group = Group.objects.using(using).filter(name=ADMIN).first()
    if group is None:
        return
    perms = Permission.objects.using(using).filter(content_type__app_label__in=FULL_APPS) | Permission.objects.using(
        using
    ).filter(content_type__app_label__in=VIEW_APPS, codename__startswith="view_")
    group.permissions.add(*perms)
