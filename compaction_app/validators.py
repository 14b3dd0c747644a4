"""Model-field validators shared by the Django admin and the JSON API (DRF copies model validators), issue 14.

- `validate_secret_env_name`: the name of an environment variable whose value is sent to a provider (an API key,
  a header value) must be allowed by the deployment (`COMPACTWEB_SECRET_ENV_PREFIX` / `COMPACTWEB_SECRET_ENV_NAMES`).
- `validate_provider_base_url` / `validate_outbound_url`: where the server may send requests (http(s) only, no
  credentials in the URL; private and loopback hosts refused unless `COMPACTWEB_OUTBOUND_ALLOW` lists them).
- `provider_key_problems`: every secret variable a provider names is bound to its base URL
  (`COMPACTWEB_PROVIDER_KEYS`, issue 27); the model's clean() and the API serializer share it, and the settings
  builder checks it again before each send.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError

from compaction_app.providers.config import EMBEDDED
from compaction_app.providers.outbound import url_problem
from compaction_app.providers.secret_env import (
    DEFAULT_PREFIX,
    key_binding_problem,
    parse_key_bindings,
    secret_env_problem,
)


def secret_env_rule() -> dict:
    """The deployment's rule as keyword arguments of `secret_env_problem`."""
    return {
        "prefix": getattr(settings, "COMPACTWEB_SECRET_ENV_PREFIX", DEFAULT_PREFIX),
        "allowed": tuple(getattr(settings, "COMPACTWEB_SECRET_ENV_NAMES", ())),
    }


def secret_env_allowed(name: str) -> bool:
    """Whether the deployment allows `name` as a secret's variable (checked again when a client is built)."""
    return secret_env_problem(name, **secret_env_rule()) is None


def validate_secret_env_name(value: str) -> None:
    """Refuse an environment variable name the deployment did not allow as a secret. Blank is allowed (no key)."""
    if not value:
        return
    problem = secret_env_problem(value, **secret_env_rule())
    if problem:
        raise ValidationError(problem, code="secret_env_not_allowed")


def outbound_url_problem(value: str) -> str | None:
    """Why the deployment refuses to send requests to `value` now, or None (checked on save and before sends)."""
    return url_problem(value, deny_private=getattr(settings, "COMPACTWEB_OUTBOUND_DENY_PRIVATE", True),
                       allow=tuple(getattr(settings, "COMPACTWEB_OUTBOUND_ALLOW", ())))


def validate_outbound_url(value: str) -> None:
    """Refuse a URL the server must not send requests to (scheme, credentials, private and loopback hosts the
    deployment did not allow)."""
    problem = outbound_url_problem(value)
    if problem:
        raise ValidationError(problem, code="url_not_allowed")


def key_bindings() -> dict[str, tuple[str, ...]]:
    return parse_key_bindings(getattr(settings, "COMPACTWEB_PROVIDER_KEYS", ""))


def key_url_problem(name: str, base_url: str) -> str | None:
    """Why the secret variable `name` may not be sent to `base_url` now, or None."""
    return key_binding_problem(name, base_url, key_bindings())


def provider_key_problems(*, base_url: str, api_key_env: str, header_envs: object) -> dict[str, str]:
    """{field: why} for each secret variable a provider names that is not bound to its base URL."""
    problems = {}
    if api_key_env and isinstance(api_key_env, str):
        problem = key_url_problem(api_key_env, base_url)
        if problem:
            problems["api_key_env"] = problem
    if isinstance(header_envs, dict):
        for header, name in header_envs.items():
            problem = key_url_problem(name, base_url) if isinstance(name, str) and name else None
            if problem:
                problems["header_envs"] = f"{header}: {problem}"
                break
    return problems


def validate_provider_base_url(value: str) -> None:
    """A provider's base URL: the literal "embedded" (the built-in simulated model) or an allowed outbound URL."""
    if value == EMBEDDED:
        return
    validate_outbound_url(value)


# Headers compactweb writes itself; an environment-valued header may not replace them (issue 19).
RESERVED_HEADERS = frozenset({"authorization", "content-type", "accept", "content-length", "host"})
_HEADER_NAME_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def header_env_problem(header: object, env_name: object) -> str | None:
    """Why one `header name → environment variable name` entry is refused, or None. The variable's name goes
    through the same rule as api_key_env (its value is sent to the provider)."""
    if not isinstance(header, str) or not header or not set(header) <= _HEADER_NAME_CHARS:
        return f"{header!r} is not an HTTP header name"
    if header.lower() in RESERVED_HEADERS:
        return f"{header} is set by compactweb itself"
    if not isinstance(env_name, str) or not env_name:
        return f"{header}: the value must name an environment variable"
    return secret_env_problem(env_name, **secret_env_rule())


def validate_header_envs(value: object) -> None:
    """Refuse a provider's `header_envs` that is not `{header name: allowed environment variable name}`."""
    if not isinstance(value, dict):
        raise ValidationError("must be an object mapping header names to environment variable names",
                              code="invalid")
    for header, env_name in value.items():
        problem = header_env_problem(header, env_name)
        if problem:
            raise ValidationError(problem, code="secret_env_not_allowed")
