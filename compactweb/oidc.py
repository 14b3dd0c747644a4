"""Single sign-on with OpenID Connect (issue 45, docs/security.md "Single sign-on"), on mozilla-django-oidc.

On with `COMPACTWEB_OIDC_ENABLED` (settings: the client id, the secret from the environment, the provider's
endpoints). A user signs in at the provider through the authorization-code flow (with PKCE); compactweb keys the
account on a username claim and sets its **role from the groups claim at every sign-in**: the highest role whose
provider group the user is in, and no role when none matches, so a user removed from the group loses the role at
the next sign-in (the group change closes their open websockets through compactweb.ws_revocation, as any role
change does). Local accounts stay: a password login still works for a break-glass admin, and the provider can
never take over a local account (a username that names one is refused).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.urls import path
from mozilla_django_oidc import views
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from compactweb.roles import ADMIN, ROLES, forget_role

logger = logging.getLogger(__name__)


def parse_role_groups(text: str) -> dict[str, frozenset[str]]:
    """`admin=cw-admins,support=cw-support,operator=cw-operators` (a role may repeat) as {role: provider groups}.
    ValueError on an unknown role or an entry without `=`."""
    mapping: dict[str, set[str]] = {}
    for entry in (text or "").replace(";", ",").split(","):
        if not entry.strip():
            continue
        role, sep, group = (part.strip() for part in entry.partition("="))
        if not sep or not group or role not in ROLES:
            raise ValueError(f"COMPACTWEB_OIDC_ROLE_GROUPS: {entry.strip()!r} is not role=group with a role among "
                             f"{', '.join(ROLES)}")
        mapping.setdefault(role, set()).add(group)
    return {role: frozenset(groups) for role, groups in mapping.items()}


def role_from_claims(claims: dict, *, mapping: dict[str, frozenset[str]], claim: str) -> str | None:
    """The highest role one of the user's provider groups maps to, or None."""
    groups = claims.get(claim) or []
    if isinstance(groups, str):
        groups = [groups]
    held = {str(g) for g in groups}
    for role in reversed(ROLES):  # highest first
        if mapping.get(role, frozenset()) & held:
            return role
    return None


class RoleMappingBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, keyed on a username claim, with the role set from the groups claim."""

    def _username(self, claims: dict) -> str:
        return str(claims.get(settings.COMPACTWEB_OIDC_USERNAME_CLAIM) or "")[:150]

    def verify_claims(self, claims: dict) -> bool:
        return bool(self._username(claims))

    def filter_users_by_claims(self, claims: dict):
        return self.UserModel.objects.filter(username=self._username(claims))

    def create_user(self, claims: dict):
        user = self.UserModel.objects.create_user(self._username(claims), email=claims.get("email") or "")
        user.set_unusable_password()  # signs in through the provider only
        user.save(update_fields=["password"])
        return self.update_user(user, claims)

    def update_user(self, user, claims: dict):
        if user.has_usable_password():
            # A local account (the break-glass admin): the provider must not be able to sign in as it.
            logger.warning("single sign-on refused for %s: a local account has that username", user.username)
            raise PermissionDenied
        apply_role(user, role_from_claims(claims, mapping=parse_role_groups(settings.COMPACTWEB_OIDC_ROLE_GROUPS),
                                          claim=settings.COMPACTWEB_OIDC_GROUPS_CLAIM))
        email = claims.get("email") or ""
        if email and email != user.email:
            user.email = email
            user.save(update_fields=["email"])
        return user


def apply_role(user, role: str | None) -> None:
    """Make `role` the user's only role group (none: no role); staff (the admin site) with the admin role."""
    groups = {g.name: g for g in Group.objects.filter(name__in=ROLES)}
    drop = [g for name, g in groups.items() if name != role]
    if drop:
        user.groups.remove(*drop)  # m2m_changed: open websockets re-check and close (compactweb.ws_revocation)
    if role is not None:
        user.groups.add(groups[role])
    if user.is_staff != (role == ADMIN):
        user.is_staff = role == ADMIN
        user.save(update_fields=["is_staff"])
    forget_role(user)


def _enabled_only(view):
    def guarded(request, *args, **kwargs):
        if not settings.COMPACTWEB_OIDC_ENABLED:
            raise Http404("single sign-on is not configured")
        return view(request, *args, **kwargs)

    return guarded


# The provider's views, answering 404 while single sign-on is off (their settings would be missing).
urlpatterns = [
    path("authenticate/", _enabled_only(views.OIDCAuthenticationRequestView.as_view()),
         name="oidc_authentication_init"),
    path("callback/", _enabled_only(views.OIDCAuthenticationCallbackView.as_view()),
         name="oidc_authentication_callback"),
]
