"""Gateway keys (issue 29): created once and shown once; only the SHA-256 is stored, so a database dump gives no
usable key. A key is long and random, so one unsalted hash is enough (no guessing a password from it)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from django.utils import timezone

from gateway_app.models import GatewayKey, GatewayRoute

KEY_PREFIX = "cwg_"


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class NewKey:
    row: GatewayKey
    key: str  # the only time the clear key exists: show it to the admin, never store it


def do_create_gateway_key(*, route: GatewayRoute, client_name: str) -> NewKey:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = GatewayKey.objects.create(route=route, client_name=client_name[:100], prefix=key[:10], digest=digest_of(key))
    return NewKey(row=row, key=key)


def key_for(*, presented: str) -> GatewayKey | None:
    """The live key whose digest matches, with its route, or None (unknown, revoked, or its route disabled)."""
    if not presented.startswith(KEY_PREFIX):
        return None
    row = (GatewayKey.objects.select_related("route", "route__provider", "route__policy")
           .filter(digest=digest_of(presented), revoked=False, route__enabled=True).first())
    if row is not None:
        GatewayKey.objects.filter(pk=row.pk).update(last_used=timezone.now())
    return row
