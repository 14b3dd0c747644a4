"""Websocket authentication off Django's one sync thread.

Channels' AuthMiddleware loads the session's user with `database_sync_to_async`, which runs every lookup of every
connecting page, one after another, on the single thread Django keeps for sync code in an ASGI process; a burst of
pages connecting at once then queues there (behind each other and anything else running there). This stack does
the same lookup (channels.auth.get_user, unchanged) on a small pool of its own, so connects proceed in parallel.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from channels.auth import AuthMiddleware, get_user
from channels.db import database_sync_to_async
from channels.sessions import CookieMiddleware, SessionMiddleware

AUTH_THREADS = 2

_pool = ThreadPoolExecutor(max_workers=AUTH_THREADS, thread_name_prefix="ws-auth")
_get_user = database_sync_to_async(get_user.func, thread_sensitive=False, executor=_pool)


class PooledAuthMiddleware(AuthMiddleware):
    async def resolve_scope(self, scope):
        scope["user"]._wrapped = await _get_user(scope)


def PooledAuthMiddlewareStack(inner):  # noqa: N802 - named like channels' AuthMiddlewareStack
    return CookieMiddleware(SessionMiddleware(PooledAuthMiddleware(inner)))
