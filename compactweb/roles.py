"""Roles (design: users and roles): Django groups operator ⊂ support ⊂ admin, checked on every view, API call and
websocket connection. Superusers hold every role.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.views import redirect_to_login
from django.db import connections, router
from rest_framework.permissions import BasePermission

OPERATOR = "operator"
SUPPORT = "support"
ADMIN = "admin"
ROLES = (OPERATOR, SUPPORT, ADMIN)  # lowest first: each role includes the ones before it
_RANK = {role: rank for rank, role in enumerate(ROLES)}


def _check_role(role: str) -> None:
    if role not in _RANK:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")


class _RoleGroups:
    """The role groups a user is in, by one statement built once per database kind from the models' `_meta`.

    Every page, API call and websocket asks this; through the ORM (`user.groups.filter(...)`) building the query
    cost several times running it (compactweb.statements says the same of the hot path's other reads)."""

    def __init__(self) -> None:
        self._sql: dict[str, str] = {}  # by database vendor

    def _compiled(self, connection) -> str:
        found = self._sql.get(connection.vendor)
        if found is None:
            quote = connection.ops.quote_name
            groups = get_user_model()._meta.get_field("groups")
            through = groups.remote_field.through._meta
            user_column = through.get_field(groups.m2m_field_name()).column
            group_column = through.get_field(groups.m2m_reverse_field_name()).column
            group = Group._meta
            name = quote(group.get_field("name").column)
            found = self._sql[connection.vendor] = (
                f"SELECT g.{name} FROM {quote(group.db_table)} g "
                f"JOIN {quote(through.db_table)} m ON m.{quote(group_column)} = g.{quote(group.pk.column)} "
                f"WHERE m.{quote(user_column)} = %s AND g.{name} IN ({', '.join(['%s'] * len(ROLES))})"
            )
        return found

    def names(self, *, user_id: int) -> set[str]:
        connection = connections[router.db_for_read(Group)]
        with connection.cursor() as cursor:
            cursor.execute(self._compiled(connection), [user_id, *ROLES])
            return {name for (name,) in cursor.fetchall()}


_role_groups = _RoleGroups()
# role_of remembers the answer on the user object for the rest of the request.
_ROLE_CACHE = "_compactweb_role"


def role_of(user) -> str | None:
    """The highest role a user holds, or None (anonymous, inactive or in no role group)."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached = getattr(user, _ROLE_CACHE, False)
    if cached is not False:
        return cached
    names = _role_groups.names(user_id=user.pk)
    role = max(names, key=_RANK.__getitem__) if names else None
    setattr(user, _ROLE_CACHE, role)
    return role


def forget_role(user) -> None:
    """Drop the role `role_of` remembered on this user object (after its groups changed in this request)."""
    user.__dict__.pop(_ROLE_CACHE, None)


def has_role(user, role: str) -> bool:
    """Whether `user` holds `role` or a higher one (admin ⊃ support ⊃ operator)."""
    _check_role(role)
    held = role_of(user)
    return held is not None and _RANK[held] >= _RANK[role]


def roles_at_or_above(role: str) -> tuple[str, ...]:
    _check_role(role)
    return ROLES[_RANK[role] :]


class _RolePermission(BasePermission):
    role = OPERATOR
    message = "This needs the operator role."

    def has_permission(self, request, view) -> bool:
        return has_role(request.user, self.role)


class IsOperator(_RolePermission):
    role = OPERATOR
    message = "This needs the operator role."


class IsSupport(_RolePermission):
    role = SUPPORT
    message = "This needs the support role."


class IsAdminRole(_RolePermission):
    role = ADMIN
    message = "This needs the admin role."


def permission_for(role: str) -> type[BasePermission]:
    return {OPERATOR: IsOperator, SUPPORT: IsSupport, ADMIN: IsAdminRole}[role]


class ReadOperatorWriteAdmin(BasePermission):
    """Reads need operator; writes need admin (providers, policies)."""

    message = "Changing this needs the admin role."

    def has_permission(self, request, view) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return has_role(request.user, OPERATOR)
        return has_role(request.user, ADMIN)


FORBIDDEN_TITLE = "You cannot open this page"


def forbidden_page(request, *, reason: str):
    """The styled 403 page (templates/error.html) saying `reason`, with the navigation the user's role allows."""
    from django.shortcuts import render

    context = {"status": 403, "title": FORBIDDEN_TITLE, "reason": reason, "role": role_of(request.user), "nav": ""}
    return render(request, "error.html", context, status=403)


def role_required(role: str) -> Callable:
    """Decorator for page views: anonymous users go to the login page, users without `role` get the styled 403
    page."""
    _check_role(role)

    def decorator(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                # An answer, not an exception: a refused role is expected, so no traceback is logged for it.
                return forbidden_page(request, reason=f"This page needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def scope_has_role(scope: dict, role: str) -> bool:
    """For websocket consumers: whether the connection's user (Channels' AuthMiddleware `scope["user"]`) holds
    `role`. Touches the database, so call it from sync code or through `database_sync_to_async`."""
    return has_role(scope.get("user"), role)


async def ascope_has_role(scope: dict, role: str) -> bool:
    """`scope_has_role` for async consumers."""
    from channels.db import database_sync_to_async

    return await database_sync_to_async(scope_has_role)(scope, role)
