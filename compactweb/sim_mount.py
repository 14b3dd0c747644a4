"""The simulated model mounted at /sim/ of the dashboard, guarded (issue 14).

Outside clients (the openai SDK, the Codex CLI, curl) reach the simulator through this mount; the dashboard's own
turns use an in-process transport and never pass here. The guard, in order:

1. `COMPACTWEB_SIM_ENABLED` off: /sim is not mounted (Django answers 404).
2. The Host header must match ALLOWED_HOSTS, as Django checks it (400 otherwise).
3. The caller must show one of:
   - `Authorization: Bearer <COMPACTWEB_SIM_TOKEN>` (a shared token from the environment; this is what an OpenAI
     client's `api_key`, or Codex's `env_key`, sends; an Anthropic client's `x-api-key` header counts the same),
   - `Authorization: Bearer <API token>` or `Token <API token>` of a user with the operator role,
   - the dashboard's session cookie of a user with the operator role; then a POST must also carry an Origin
     that is the dashboard's own or listed in CSRF_TRUSTED_ORIGINS (issue 27: a cookie alone is what a cross-site
     form sends), else 403 `csrf_failed`.
   Anything else is a 401 in the OpenAI error shape.
4. Bodies over `COMPACTWEB_SIM_MAX_BODY_BYTES` are refused with 413 before they are read (and the simulator caps
   every fault parameter itself).
"""

from __future__ import annotations

import hmac
import json
from http.cookies import CookieError, SimpleCookie
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from compactweb.api_tokens import user_for_token
from compactweb.origins import host_allowed, origin_allowed
from compactweb.roles import OPERATOR, has_role

MOUNT = "/sim"


async def _send_error(send, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": code}}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _operator_from_token(token: str) -> bool:
    user = user_for_token(token)
    return user is not None and has_role(user, OPERATOR)


def _operator_from_session(cookie_header: str) -> bool:
    try:
        cookies = SimpleCookie(cookie_header)
    except CookieError:
        return False
    morsel = cookies.get(settings.SESSION_COOKIE_NAME)
    if morsel is None or not morsel.value:
        return False
    session = import_string(settings.SESSION_ENGINE + ".SessionStore")(morsel.value)
    try:
        user_id, backend_path = session[SESSION_KEY], session[BACKEND_SESSION_KEY]
    except KeyError:
        return False
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    user = load_backend(backend_path).get_user(user_id)
    if user is None or not hasattr(user, "get_session_auth_hash"):
        return False
    if not constant_time_compare(session.get(HASH_SESSION_KEY, ""), user.get_session_auth_hash()):
        return False  # the password changed since this session logged in
    return has_role(user, OPERATOR)


COOKIE = "cookie"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _authorised(headers: dict[str, str]) -> str | None:
    """How the caller showed who it is ("token" or COOKIE), or None. Sync (touches the database); run through
    database_sync_to_async."""
    scheme, _, credential = headers.get("authorization", "").strip().partition(" ")
    credential = credential.strip()
    api_key = headers.get("x-api-key", "").strip()
    if api_key and not credential:
        # Anthropic clients (Claude Code with ANTHROPIC_API_KEY) send the key in x-api-key instead.
        scheme, credential = "bearer", api_key
    if credential and scheme.lower() in ("bearer", "token"):
        shared = getattr(settings, "COMPACTWEB_SIM_TOKEN", "")
        if shared and scheme.lower() == "bearer" and hmac.compare_digest(credential.encode(), shared.encode()):
            return "token"
        if _operator_from_token(credential):
            return "token"
    cookie = headers.get("cookie")
    return COOKIE if cookie and _operator_from_session(cookie) else None


def _cross_site(scope: dict[str, Any], headers: dict[str, str]) -> bool:
    """A state-changing request on the strength of a cookie must come from the dashboard's own pages: its Origin
    (browsers send one on every cross-site POST) is the dashboard's, or listed in CSRF_TRUSTED_ORIGINS. A request
    without an Origin is refused too; clients that are not browsers authenticate with a token."""
    if scope.get("method", "GET").upper() in SAFE_METHODS:
        return False
    return not origin_allowed(origin=headers.get("origin", ""), host=headers.get("host", ""),
                              scheme=scope.get("scheme", "http"))


def guarded_sim_app(sim_app):
    """Wrap the simulator's ASGI app with the checks above."""
    async def app(scope, receive, send):
        headers = _headers(scope)
        if not host_allowed(headers.get("host", "")):
            await _send_error(send, 400, "invalid_host", "the Host header is not in ALLOWED_HOSTS")
            return
        shown = await database_sync_to_async(_authorised)(headers)
        if shown is None:
            await _send_error(send, 401, "invalid_api_key",
                              "the simulated model needs COMPACTWEB_SIM_TOKEN as a bearer token, an operator's API "
                              "token, or a dashboard login (docs/security.md)",
                              {"WWW-Authenticate": 'Bearer realm="compactweb-sim"'})
            return
        if shown == COOKIE and _cross_site(scope, headers):
            await _send_error(send, 403, "csrf_failed",
                              "a POST authenticated by the dashboard's cookie must come from the dashboard's own "
                              "origin (Origin header); other clients send a token")
            return
        await sim_app(scope, receive, send)

    return app
