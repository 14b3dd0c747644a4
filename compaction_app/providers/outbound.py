"""Where the server may send requests (issue 14): provider base URLs and webhook targets. Plain Python.

Checked when a URL is written (model validators) so a `file://` or `gopher://` URL is refused with a 400 instead of
being stored and failing the next turn. With `deny_private`, URLs whose host is (or resolves to) a loopback,
private, link-local or otherwise non-public address are refused too, for deployments that must not reach their
own network from a configurable URL.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

SCHEMES = ("http", "https")
Resolver = Callable[[str], list[str]]


def _resolve(host: str) -> list[str]:
    return sorted({info[4][0] for info in socket.getaddrinfo(host, None)})


def _non_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def url_problem(url: str, *, deny_private: bool = False, resolver: Resolver = _resolve) -> str | None:
    """Why the server may not send requests to `url`, or None when it may."""
    if not isinstance(url, str) or not url.strip() or url != url.strip():
        return "must be an http(s) URL without surrounding spaces"
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a bad port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme.lower() not in SCHEMES:
        return f"must use http or https, not {parts.scheme or 'no scheme'!r}"
    host = parts.hostname
    if not host:
        return "must name a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials (user:password@); keys come from environment variables"
    del port
    if not deny_private:
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return f"{host} is a loopback host, refused by COMPACTWEB_OUTBOUND_DENY_PRIVATE"
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            addresses = resolver(host)
        except OSError:
            return f"{host} does not resolve (COMPACTWEB_OUTBOUND_DENY_PRIVATE needs a public address)"
    private = [a for a in addresses if _non_public(a)]
    if private:
        return f"{host} is a private or loopback address ({private[0]}), refused by COMPACTWEB_OUTBOUND_DENY_PRIVATE"
    return None
