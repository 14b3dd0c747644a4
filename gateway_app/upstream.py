"""The route's upstream, over httpx (issue 29): one AsyncClient per upstream and event loop, its key from the
Provider's `api_key_env` (through the deployment's allow-list), never from the client.

Only the headers Codex sends that an upstream Responses endpoint uses are forwarded (the turn metadata, the beta
features, the session and request ids, the client's name); the client's `Authorization` only on a route that
passes the client's bearer through (and then it replaces the Provider's key).
"""

from __future__ import annotations

import asyncio
import json
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.connection import EMBEDDED_BASE_URL
from compaction_app.providers.factory import embedded_transport

FORWARDED = frozenset({"accept", "content-type", "user-agent", "originator", "version", "session-id", "thread-id",
                       "x-client-request-id", "openai-beta", "openai-organization", "openai-project"})
FORWARDED_PREFIXES = ("x-codex-", "x-openai-", "x-sim-")
RETURNED = frozenset({"content-type", "cache-control", "retry-after", "x-request-id", "x-reasoning-included"})
RETURNED_PREFIXES = ("openai-", "x-ratelimit-", "x-codex-")

_clients: dict[tuple[int, tuple], httpx.AsyncClient] = {}


def forwarded_headers(headers: dict[str, str], config: ProviderConfig, bearer: str = "") -> dict[str, str]:
    """The headers the upstream gets: `bearer` (the client's own, on a route that passes it through) or else the
    Provider's key as the Authorization."""
    out = {k: v for k, v in headers.items() if k in FORWARDED or k.startswith(FORWARDED_PREFIXES)}
    out.update(config.extra_headers)
    out.update(config.env_headers())
    key = bearer or config.api_key()
    if key:
        out["authorization"] = f"Bearer {key}"
    return out


def returned_headers(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
            if k.lower() in RETURNED or k.lower().startswith(RETURNED_PREFIXES)]


def transport_for(config: ProviderConfig) -> httpx.AsyncBaseTransport | None:
    """The pooled client's transport: the embedded simulated model's, else httpx's own (None)."""
    return embedded_transport(context_window=config.context_window) if config.is_embedded else None


def _no_cookies() -> CookieJar:
    """A jar that keeps nothing: the pooled client serves every client of the route, so a cookie one client's
    answer set must never go out with another's request."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


def client_for(config: ProviderConfig) -> httpx.AsyncClient:
    """A pooled client for this upstream in the running loop (a client is bound to the loop it was used on). It
    keeps no cookies, and asks for answers uncompressed: the gateway passes the bytes on as they come, and
    decompressing only to pass them on would cost time and hold back a stream's chunks."""
    loop_id = id(asyncio.get_running_loop())
    key = (loop_id, (config.base_url, config.connect_timeout, config.read_timeout, config.context_window))
    client = _clients.get(key)
    if client is None:
        timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        client = httpx.AsyncClient(transport=transport_for(config), timeout=timeout, limits=limits,
                                   cookies=_no_cookies(), headers={"accept-encoding": "identity"})
        _clients[key] = client
    return client


def url_for(config: ProviderConfig, path: str) -> str:
    base = EMBEDDED_BASE_URL if config.is_embedded else config.base_url.rstrip("/")
    return f"{base}/{path.lstrip('/')}"


class _Refused(httpx.AsyncBaseTransport):
    """A transport that sends nothing: the deployment's outbound rule refuses the route's upstream now
    (ProviderConfig.refused, issue 27); the proxy answers it as an unreachable upstream."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused by the deployment's outbound rule: {self.reason}", request=request)


def request(config: ProviderConfig, method: str, path: str, headers: dict[str, str],
            content: bytes | None = None, *, bearer: str = "") -> tuple[httpx.AsyncClient, httpx.Request]:
    client = httpx.AsyncClient(transport=_Refused(config.refused)) if config.refused else client_for(config)
    return client, client.build_request(method, url_for(config, path),
                                        headers=forwarded_headers(headers, config, bearer), content=content)


def error_body(code: str, message: str, *, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


