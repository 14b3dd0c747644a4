"""The role groups and the Django-admin permissions of the admin role, kept in step after every migrate, and the
guards that keep the role system itself out of reach of the admin role (issue 14)."""

from __future__ import annotations

from compactweb.roles import ADMIN, ROLES

# The admin role configures everything (design): full rights on configuration (gateway routes and keys too) and
# users, read-only on records.
# No rights on API tokens (knox): they are stored hashed and issued to their owner only (issue 14).
FULL_APPS = ("compaction_app", "gateway_app", "auth")
VIEW_APPS = ("sessions_app",)


class RoleGroupProtected(Exception):
    """A role group (operator, support, admin) may not be renamed or deleted: every role check names them."""


def ensure_role_groups(*, using: str = "default") -> None:
    """Create any missing role group (a deleted group comes back on the next migrate)."""
    from django.contrib.auth.models import Group

    for name in ROLES:
        Group.objects.using(using).get_or_create(name=name)


def grant_admin_permissions(sender=None, using="default", **kwargs) -> None:
    """post_migrate: recreate the role groups and give the admin group its permissions.

    Django sends post_migrate once per installed app with models, and creates each app's permissions on that app's
    signal: the grant runs once, on the last app's, when every app's permissions exist (it ran on each of the ten
    before, and was half of every post_migrate; a test database emits one after each transactional test)."""
    from django.apps import apps
    from django.contrib.auth.models import Group, Permission

    if sender is not None and sender is not [c for c in apps.get_app_configs() if c.models_module is not None][-1]:
        return
    ensure_role_groups(using=using)
    group = Group.objects.using(using).get(name=ADMIN)
    perms = Permission.objects.using(using).filter(content_type__app_label__in=FULL_APPS) | Permission.objects.using(
        using
    ).filter(content_type__app_label__in=VIEW_APPS, codename__startswith="view_")
    group.permissions.add(*perms)


def refuse_role_group_rename(sender, instance, raw=False, **kwargs) -> None:
    """pre_save of Group: a role group keeps its name."""
    if raw or instance.pk is None:
        return
    old = sender.objects.filter(pk=instance.pk).values_list("name", flat=True).first()
    if old in ROLES and instance.name != old:
        raise RoleGroupProtected(f"the role group {old!r} cannot be renamed")


def refuse_role_group_delete(sender, instance, **kwargs) -> None:
    """pre_delete of Group: role groups stay."""
    if instance.name in ROLES:
        raise RoleGroupProtected(f"the role group {instance.name!r} cannot be deleted")


def connect_signals() -> None:
    from django.contrib.auth.models import Group
    from django.db.models.signals import pre_delete, pre_save

    pre_save.connect(refuse_role_group_rename, sender=Group, dispatch_uid="compactweb_role_group_rename")
    pre_delete.connect(refuse_role_group_delete, sender=Group, dispatch_uid="compactweb_role_group_delete")
