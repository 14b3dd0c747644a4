"""Per-user API tokens, stored hashed (issue 14): django-rest-knox keeps a SHA-512 digest and the first 15
characters, never the token itself, so a copy of the database (or a look at the admin) yields no usable token.
A token is shown once, when it is issued. Clients send it as before: `Authorization: Token <token>`.
"""

from __future__ import annotations

import binascii
from hmac import compare_digest

from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.models import AuthToken
from knox.settings import CONSTANTS, knox_settings
from knox.signals import token_expired
from rest_framework import exceptions

from compactweb import statements


def issue_token(*, user) -> str:
    """Create a new API token for `user` and return it; only its digest is stored, so this is the one chance to
    see it. Tokens of `user` whose expiry has passed are deleted here (knox sweeps them on every request)."""
    AuthToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()
    _instance, token = AuthToken.objects.create(user=user, expiry=None)
    return token


def revoke_tokens(*, user) -> int:
    """Delete every API token of `user`; returns how many there were."""
    deleted, _ = AuthToken.objects.filter(user=user).delete()
    return deleted


def user_tokens(*, user) -> list[AuthToken]:
    """The user's API tokens, newest first: only their first characters and dates (the token itself is gone)."""
    return list(AuthToken.objects.filter(user=user).order_by("-created"))


def revoke_token(*, user, token_key: str) -> bool:
    """Delete the user's token that starts with `token_key` (another user's is never touched); whether it existed."""
    deleted, _ = AuthToken.objects.filter(user=user, token_key=token_key).delete()
    return bool(deleted)


def user_for_token(token: str):
    """The active user whose API token is `token`, or None (unknown, expired, malformed or inactive)."""
    try:
        user, _auth = HashedTokenAuthentication().authenticate_credentials(token.encode("utf-8"))
    except (exceptions.AuthenticationFailed, UnicodeError):
        return None
    return user


class HashedTokenAuthentication(TokenAuthentication):
    """knox's TokenAuthentication with its reads as statements built once (compactweb.statements): the tokens
    with the given key, then the user of the one whose digest matches. knox reads the token and its user through
    the ORM and then every token of that user, to sweep expired ones: on every API call, building those queries
    was about a quarter of an append request (docs/benchmarks.md, "Round five"). The sweep moved to
    `issue_token`; a token whose own expiry has passed is still refused and deleted here, as knox does. A token
    that is not UTF-8 is refused with 401 instead of raising (a 500)."""

    def authenticate_credentials(self, token: bytes):
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid() from None
        try:
            digest = hash_token(text)
        except (TypeError, binascii.Error):
            raise _invalid() from None
        for auth_token in _TOKENS_BY_KEY.all(where=(text[: CONSTANTS.TOKEN_KEY_LENGTH],)):
            if auth_token.expiry is not None and auth_token.expiry < timezone.now():
                user = _USER.get(where=(auth_token.user_id,))
                auth_token.delete()
                token_expired.send(sender=self.__class__, username=user.get_username(), source="auth_token")
                continue
            if compare_digest(digest, auth_token.digest):
                try:
                    auth_token.user = _USER.get(where=(auth_token.user_id,))
                except get_user_model().DoesNotExist:
                    raise _invalid() from None
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                return self.validate_user(auth_token)
        raise _invalid()


def _invalid() -> exceptions.AuthenticationFailed:
    return exceptions.AuthenticationFailed(_("Invalid token."))


_TOKENS_BY_KEY = statements.Select(AuthToken, where=("token_key",))
_USER = statements.Select(get_user_model(), where=("pk",))


class HashedTokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of the token header (`Authorization: Token <token>`)."""

    target_class = "compactweb.api_tokens.HashedTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Token")
