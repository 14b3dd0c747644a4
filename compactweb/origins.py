"""Is a request's Host allowed, and is an Origin the dashboard's own (issues 14 and 27)?

Shared by the websocket handshake (`compactweb.ws_origin`) and the /sim guard (`compactweb.sim_mount`, for requests
that authenticate with the dashboard's cookie). The Origin must be the dashboard's own origin (the Host the browser
connected to, with the scheme of the connection, and that Host must be allowed) or be listed exactly in
CSRF_TRUSTED_ORIGINS (what a TLS-terminating proxy's public origin should be listed in): scheme, host and port.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host


def host_allowed(host: str) -> bool:
    """Django's own Host check (ALLOWED_HOSTS; with DEBUG and no ALLOWED_HOSTS, the local names)."""
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_origin(origin: str) -> str | None:
    """`scheme://host[:port]` in lower case with the default port dropped, or None when it is not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host or parts.path not in ("", "/") or parts.query or parts.username:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}" if port in (None, DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


def origin_allowed(*, origin: str, host: str, scheme: str) -> bool:
    wanted = normalise_origin(origin)
    if wanted is None:
        return False
    trusted = {normalise_origin(o) for o in settings.CSRF_TRUSTED_ORIGINS}
    if wanted in trusted:
        return True
    if not host or not host_allowed(host):
        return False
    http_scheme = "https" if scheme in ("wss", "https") else "http"
    return wanted == normalise_origin(f"{http_scheme}://{host}")
