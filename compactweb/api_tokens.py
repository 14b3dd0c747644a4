"""Per-user API tokens, stored hashed (issue 14): django-rest-knox keeps a SHA-512 digest and the first 15
characters, never the token itself, so a copy of the database (or a look at the admin) yields no usable token.
A token is shown once, when it is issued. Clients send it as before: `Authorization: Token <token>`.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions


def issue_token(*, user) -> str:
    """Create a new API token for `user` and return it; only its digest is stored, so this is the one chance to
    see it."""
    _instance, token = AuthToken.objects.create(user=user, expiry=None)
    return token


def revoke_tokens(*, user) -> int:
    """Delete every API token of `user`; returns how many there were."""
    deleted, _ = AuthToken.objects.filter(user=user).delete()
    return deleted


def user_for_token(token: str):
    """The active user whose API token is `token`, or None (unknown, expired, malformed or inactive)."""
    try:
        user, _auth = HashedTokenAuthentication().authenticate_credentials(token.encode("utf-8"))
    except (exceptions.AuthenticationFailed, UnicodeError):
        return None
    return user


class HashedTokenAuthentication(TokenAuthentication):
    """knox's TokenAuthentication; a token that is not UTF-8 is refused with 401 instead of raising (a 500)."""

    def authenticate_credentials(self, token: bytes):
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        return super().authenticate_credentials(token)


class HashedTokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of the token header (`Authorization: Token <token>`)."""

    target_class = "compactweb.api_tokens.HashedTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Token")
