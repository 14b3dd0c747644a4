"""Template context every page gets."""

from __future__ import annotations

from django.conf import settings

from compactweb.roles import role_of


def role(request) -> dict:
    """The signed-in user's role (operator, support, admin or None), for the navigation and the role-gated buttons."""
    user = getattr(request, "user", None)
    return {"role": role_of(user) if user is not None else None, "sso_enabled": settings.COMPACTWEB_OIDC_ENABLED}
