"""Which environment variables may be named as secrets (issue 14): plain Python, no Django.

A provider's `api_key_env` (and any header whose value is read from the environment) names a variable whose value is
sent to the provider's URL. Without a rule, whoever may configure a provider could name `DJANGO_SECRET_KEY` or
`DATABASE_URL` and point `base_url` at their own listener. So only names the deployment's operator allowed qualify:
names starting with a required prefix (default `COMPACTWEB_KEY_`), or names on an explicit allow-list. And each
such name is sent only to the base URLs the deployment bound it to (`COMPACTWEB_PROVIDER_KEYS`, issue 27).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

DEFAULT_PREFIX = "COMPACTWEB_KEY_"
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def secret_env_problem(name: str, *, prefix: str, allowed: Iterable[str]) -> str | None:
    """Why `name` may not be used as a secret's environment variable, or None when it may.

    An empty `prefix` disables the prefix rule (then only the allow-list counts)."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        return "must be an environment variable name (letters, digits and underscores, not starting with a digit)"
    if name in set(allowed) or (prefix and name.startswith(prefix) and len(name) > len(prefix)):
        return None
    rules = []
    if prefix:
        rules.append(f"start with {prefix}")
    rules.append("be listed in COMPACTWEB_SECRET_ENV_NAMES")
    return f"{name} is not an allowed secret variable: its name must " + " or ".join(rules) + " (docs/security.md)"


def is_allowed_secret_env(name: str, *, prefix: str, allowed: Iterable[str]) -> bool:
    return secret_env_problem(name, prefix=prefix, allowed=allowed) is None


# Issue 27: a name allowed as a secret is still sent only to the base URLs the deployment bound it to, so whoever
# may configure a provider cannot point an allowed key at a listener of their own.
BINDINGS_SETTING = "COMPACTWEB_PROVIDER_KEYS"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_key_bindings(text: str) -> dict[str, tuple[str, ...]]:
    """`NAME=URL URL;NAME2=URL` (URLs separated by spaces or commas; a name may repeat) as {name: base URLs}."""
    bindings: dict[str, list[str]] = {}
    for entry in (text or "").replace("\n", ";").split(";"):
        name, sep, urls = entry.partition("=")
        name = name.strip()
        if not sep or not name:
            continue
        bindings.setdefault(name, []).extend(u for u in urls.replace(",", " ").split() if u)
    return {name: tuple(urls) for name, urls in bindings.items()}


def _origin_and_path(url: str) -> tuple[str, str, int | None, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not parts.hostname:
        return None  # "embedded" and the like match only themselves (url_under's equality)
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS.get(scheme), parts.path.rstrip("/")


def url_under(url: str, allowed: str) -> bool:
    """Whether `url` is `allowed` or below it: the same scheme, host and port, and a path at or under its path (on
    a segment boundary: `https://h/v1` covers `https://h/v1/` and `https://h/v1/x`, not `https://h/v10`)."""
    if url == allowed:
        return True
    mine, theirs = _origin_and_path(url), _origin_and_path(allowed)
    if mine is None or theirs is None or mine[:3] != theirs[:3]:
        return False
    return mine[3] == theirs[3] or mine[3].startswith(theirs[3] + "/")


def key_binding_problem(name: str, base_url: str, bindings: dict[str, tuple[str, ...]]) -> str | None:
    """Why the secret variable `name` may not be sent to `base_url`, or None when the deployment bound it there."""
    urls = bindings.get(name)
    if not urls:
        return (f"{name} is not bound to any base URL: the deployment lists where each key may go in "
                f"{BINDINGS_SETTING} ({name}=<base URL>; docs/security.md)")
    if not any(url_under(base_url, allowed) for allowed in urls):
        return f"{name} may be sent only to {', '.join(urls)} ({BINDINGS_SETTING}), not to {base_url}"
    return None
