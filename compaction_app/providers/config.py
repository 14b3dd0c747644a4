"""How to reach one model provider: a frozen, Django-free mirror of a Provider row (issue 3).

The API key itself is never part of the config: only the *name* of the environment variable holding it, read when a
client is built (`api_key()`), so a config can be logged, shown or stored without leaking the secret.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from compaction_app.engine.settings import DEFAULT_REQUEST_MAX_RETRIES, DEFAULT_STREAM_MAX_RETRIES
from compaction_app.engine.thresholds import DEFAULT_CONTEXT_WINDOW, DEFAULT_EFFECTIVE_PERCENT

EMBEDDED = "embedded"
WIRE_APIS = ("responses", "chat", "anthropic")
REMOTE_COMPACTION_MODES = ("none", "v1", "v2")
STREAM_MAX_RETRIES_CAP = 100  # spec §6.2: hard cap on stream_max_retries


@dataclass(frozen=True)
class ProviderConfig:
    """Connection and retry settings of one provider (spec §6.2, §12; design "Providers")."""

    name: str
    model: str
    base_url: str = EMBEDDED
    wire_api: str = "responses"
    fallback_model: str = ""
    context_window: int = DEFAULT_CONTEXT_WINDOW
    effective_context_window_percent: int = DEFAULT_EFFECTIVE_PERCENT
    remote_compaction: str = "none"
    api_key_env: str = ""
    connect_timeout: float = 10.0
    read_timeout: float = 300.0
    stream_max_retries: int = DEFAULT_STREAM_MAX_RETRIES
    request_max_retries: int = DEFAULT_REQUEST_MAX_RETRIES
    extra_headers: dict[str, str] = field(default_factory=dict)
    # Headers whose values are read from environment variables when a client is built: {header: variable name}.
    header_envs: dict[str, str] = field(default_factory=dict)
    # Why the deployment refuses to send to base_url now (its outbound rule, checked when the config is built);
    # non-empty: every request fails at once with this reason, nothing leaves the process.
    refused: str = ""

    def __post_init__(self) -> None:
        problems = []
        if not self.name:
            problems.append("name must not be empty")
        if not self.model:
            problems.append("model must not be empty")
        # A URL's scheme is case-insensitive (RFC 3986 §3.1): `HTTP://` is saved as given and sent as http (issue 27).
        if self.base_url != EMBEDDED and not self.base_url.lower().startswith(("http://", "https://")):
            problems.append(f"base_url must be {EMBEDDED!r} or an http(s) URL, got {self.base_url!r}")
        if self.wire_api not in WIRE_APIS:
            problems.append(f"wire_api must be one of {', '.join(WIRE_APIS)}, got {self.wire_api!r}")
        if self.remote_compaction not in REMOTE_COMPACTION_MODES:
            problems.append(
                f"remote_compaction must be one of {', '.join(REMOTE_COMPACTION_MODES)}, got {self.remote_compaction!r}"
            )
        if self.context_window <= 0:
            problems.append("context_window must be positive")
        if not 0 < self.effective_context_window_percent <= 100:
            problems.append("effective_context_window_percent must be in 1..100")
        if not 0 <= self.stream_max_retries <= STREAM_MAX_RETRIES_CAP:
            problems.append(f"stream_max_retries must be in 0..{STREAM_MAX_RETRIES_CAP}")
        if self.request_max_retries < 0:
            problems.append("request_max_retries must not be negative")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            problems.append("timeouts must be positive")
        if problems:
            raise ValueError("invalid provider config: " + "; ".join(problems))

    @property
    def is_embedded(self) -> bool:
        return self.base_url == EMBEDDED

    def api_key(self) -> str | None:
        """The key from the environment variable named by `api_key_env`, or None when unset/empty."""
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env) or None

    def env_headers(self) -> dict[str, str]:
        """The `header_envs` headers whose variables are set (non-empty) now; an unset variable sends none."""
        return {header: value for header, name in self.header_envs.items() if (value := os.environ.get(name))}

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> ProviderConfig:
        """Build from a dict (e.g. a Provider row's field values); unknown keys are ignored."""
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("extra_headers") is None:
            values.pop("extra_headers", None)
        return cls(**values)
