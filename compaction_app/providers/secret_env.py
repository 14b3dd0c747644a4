"""Which environment variables may be named as secrets (issue 14): plain Python, no Django.

A provider's `api_key_env` (and any header whose value is read from the environment) names a variable whose value is
sent to the provider's URL. Without a rule, whoever may configure a provider could name `DJANGO_SECRET_KEY` or
`DATABASE_URL` and point `base_url` at their own listener. So only names the deployment's operator allowed qualify:
names starting with a required prefix (default `COMPACTWEB_KEY_`), or names on an explicit allow-list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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
