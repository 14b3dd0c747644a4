"""Websocket authentication resolved inside the consumer's one connect read.

Channels' AuthMiddleware loads the session's user with its own `database_sync_to_async` call before the consumer
runs. Every such call is a thread hop and, with PostgreSQL (CONN_MAX_AGE 0), a database connection opened and
closed; with the consumer's own role check and first read that made three of each per connect, and a burst of
pages connecting at once queued every stage of every connect behind the others on two small pools, so the whole
burst finished together (docs/benchmarks.md, "Websocket connect bursts"). Here the middleware only puts a lazy
user in the scope; the consumer resolves it (`resolve_user`, channels.auth.get_user unchanged) in the same call that
checks the role and reads the session, so a connect costs one hop and one connection.

A consumer that reads `scope["user"]` without resolving it first fails loudly (channels' UserLazyObject raises
"Accessing scope user before it is ready"), so no route can skip the check by accident.
"""

from __future__ import annotations

from importlib import import_module

from channels.auth import AuthMiddleware, get_user
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.conf import settings


class DeferredAuthMiddleware(AuthMiddleware):
    """channels' AuthMiddleware without the lookup: scope["user"] is resolved by `resolve_user`."""

    async def resolve_scope(self, scope):
        return None


def DeferredAuthMiddlewareStack(inner):  # noqa: N802 - named like channels' AuthMiddlewareStack
    return CookieMiddleware(SessionMiddleware(DeferredAuthMiddleware(inner)))


def has_session_cookie(scope: dict) -> bool:
    """Whether the connection brought a session key at all (no database): without one the user is anonymous."""
    session = scope.get("session")
    return session is not None and session.session_key is not None


def resolve_user(scope: dict):
    """Load the connection's user from its session and settle scope["user"]; synchronous (call it on a database
    thread). AnonymousUser when the session holds no valid login."""
    user = get_user.func(scope)
    scope["user"]._wrapped = user
    return user


def reload_user(scope: dict):
    """The connection's user as a fresh read of its session would find it now (synchronous): AnonymousUser once
    the session is gone (logout), its auth hash no longer matches (password changed) or the user is inactive or
    deleted. Used to re-check an open connection (compactweb.ws_revocation)."""
    session = scope.get("session")
    if session is None or session.session_key is None:
        return _anonymous()
    fresh = import_module(settings.SESSION_ENGINE).SessionStore(session.session_key)
    return get_user.func({"session": fresh})


def _anonymous():
    from django.contrib.auth.models import AnonymousUser

    return AnonymousUser()
