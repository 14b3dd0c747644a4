"""Gateway keys (issue 29): created once and shown once; only the SHA-256 is stored, so a database dump gives no
usable key. A key is long and random, so one unsalted hash is enough (no guessing a password from it)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from gateway_app.models import GatewayKey, GatewayRoute

KEY_PREFIX = "cwg_"


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class NewKey:
    row: GatewayKey
    key: str  # the only time the clear key exists: show it to the admin, never store it


def _create(*, route: GatewayRoute | None = None, user=None, client_name: str) -> NewKey:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = GatewayKey.objects.create(route=route, user=user, client_name=client_name[:100], prefix=key[:10],
                                    digest=digest_of(key))
    return NewKey(row=row, key=key)


def do_create_gateway_key(*, route: GatewayRoute, client_name: str) -> NewKey:
    return _create(route=route, client_name=client_name)


def do_create_user_gateway_key(*, user, name: str) -> NewKey:
    """A user's own key: it works on every route that allows user keys, as that user."""
    return _create(user=user, client_name=name)


def do_revoke_user_gateway_key(*, user, key_id: int) -> GatewayKey:
    """Revoke one of `user`'s own keys (GatewayKey.DoesNotExist for a key of anyone else)."""
    row = GatewayKey.objects.get(pk=key_id, user=user)
    row.revoked = True
    row.save(update_fields=["revoked"])
    return row


def user_keys(*, user) -> list[GatewayKey]:
    return list(GatewayKey.objects.filter(user=user).order_by("-created"))


def user_key_routes() -> list[GatewayRoute]:
    return list(GatewayRoute.objects.filter(enabled=True, allow_user_keys=True).order_by("name"))


def user_key_route(*, name: str) -> GatewayRoute | None:
    return (GatewayRoute.objects.select_related("provider", "policy")
            .filter(name=name, enabled=True, allow_user_keys=True).first())


def key_for(*, presented: str) -> GatewayKey | None:
    """The live key whose digest matches, with its route or user, or None (unknown, revoked, its route disabled,
    its user inactive). A read only: `do_touch_key` notes the use."""
    if not presented.startswith(KEY_PREFIX):
        return None
    row = (GatewayKey.objects.select_related("route", "route__provider", "route__policy", "user")
           .filter(Q(route__enabled=True) | Q(route__isnull=True, user__is_active=True),
                   digest=digest_of(presented), revoked=False).first())
    return row


def do_touch_key(*, key_id: int) -> None:
    """Note when a key was last used (on the recorder's thread: a key lookup never waits behind a write)."""
    GatewayKey.objects.filter(pk=key_id).update(last_used=timezone.now())
