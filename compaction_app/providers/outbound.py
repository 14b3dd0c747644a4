"""Where the server may send requests (issues 14, 27): provider base URLs and webhook targets. Plain Python.

Checked when a URL is written (model validators) so a `file://` or `gopher://` URL is refused with a 400 instead of
being stored and failing the next turn, and again before each send (a row saved under an older rule, or a name
that now resolves elsewhere). With `deny_private` (the default of every deployment), URLs whose host is (or
resolves to) a loopback, private, link-local or otherwise non-public address are refused unless the deployment
lists them in its allow-list: a host (`localhost`), a host and port (`127.0.0.1:8000`, `[::1]:8000`) or a network
(`10.1.0.0/16`), for a model server on the local network.
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


DEFAULT_PORTS = {"http": 80, "https": 443}


def _normal_host(host: str) -> str:
    host = host.strip().lower().strip("[]")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.rstrip(".")


def parse_allow_entry(entry: str) -> tuple[str, object]:
    """One allow-list entry as ("network", ip_network) or ("host", (host, port or None)); ValueError when bad."""
    entry = entry.strip()
    if not entry:
        raise ValueError("empty entry")
    if "/" in entry:
        return "network", ipaddress.ip_network(entry, strict=False)
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    else:
        host, port = entry, ""
    if port and not port.isdigit():
        raise ValueError(f"bad port in {entry!r}")
    return "host", (_normal_host(host), int(port) if port else None)


def _allowed_host(host: str, port: int, allow: tuple[str, ...]) -> bool:
    for entry in allow:
        try:
            kind, value = parse_allow_entry(entry)
        except ValueError:
            continue
        if kind == "host" and value[0] == host and value[1] in (None, port):
            return True
    return False


def _in_allowed_network(address: str, allow: tuple[str, ...]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    for entry in allow:
        try:
            kind, value = parse_allow_entry(entry)
        except ValueError:
            continue
        if kind == "network" and ip.version == value.version and ip in value:
            return True
        if kind == "host" and value[0] == str(ip) and value[1] is None:
            return True
    return False


def url_problem(url: str, *, deny_private: bool = False, allow: tuple[str, ...] | list[str] = (),
                resolver: Resolver = _resolve) -> str | None:
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
    if not deny_private:
        return None
    allow = tuple(allow)
    port = port or DEFAULT_PORTS[parts.scheme.lower()]
    host = _normal_host(host)
    if _allowed_host(host, port, allow):
        return None
    unless = "unless listed in COMPACTWEB_OUTBOUND_ALLOW"
    if host == "localhost" or host.endswith(".localhost"):
        return f"{host} is a loopback host, refused by COMPACTWEB_OUTBOUND_DENY_PRIVATE {unless}"
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            addresses = resolver(host)
        except OSError:
            # Nothing to reach (yet): the check runs again before every send, when the name must resolve to
            # public addresses (or allowed ones) to be used.
            return None
    private = [a for a in addresses if _non_public(a) and not _in_allowed_network(a, allow)]
    if private:
        return (f"{host} is a private or loopback address ({private[0]}), refused by "
                f"COMPACTWEB_OUTBOUND_DENY_PRIVATE {unless}")
    return None
