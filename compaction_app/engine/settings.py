"""The settings one compaction runs with: built by the Django side from the provider and the policy (spec §2.2,
§2.5, §12). Frozen, so a compaction cannot change them half way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compaction_app.engine.history import COMPACT_USER_MESSAGE_MAX_TOKENS, RETAINED_MESSAGE_TOKEN_BUDGET
from compaction_app.engine.thresholds import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_EFFECTIVE_PERCENT,
    auto_compact_limit,
    usable_window,
)
from compaction_app.engine.tokens import COUNTERS, DEFAULT_ENCODING
from compaction_app.engine.vocabulary import RemoteSupport, Scope, StrategyPreference

# spec §12: provider stream retries default 5, hard cap 100; HTTP request retries default 4.
DEFAULT_STREAM_MAX_RETRIES = 5
DEFAULT_REQUEST_MAX_RETRIES = 4
MAX_RETRIES_CAP = 100




@dataclass(frozen=True)
class CompactionSettings:
    """Everything about the model, provider and policy that a compaction reads (spec §12)."""

    model: str
    context_window: int | None = DEFAULT_CONTEXT_WINDOW
    effective_percent: int = DEFAULT_EFFECTIVE_PERCENT
    auto_compact_token_limit: int | None = None
    scope: Scope = Scope.TOTAL
    token_counter: str = DEFAULT_ENCODING
    strategy: StrategyPreference = StrategyPreference.AUTO
    remote_compaction: RemoteSupport = RemoteSupport.NONE
    remote_compaction_v2: bool = False
    token_budget: bool = False
    compact_prompt: str | None = None
    user_message_budget: int = COMPACT_USER_MESSAGE_MAX_TOKENS
    retained_message_budget: int = RETAINED_MESSAGE_TOKEN_BUDGET
    stream_max_retries: int = DEFAULT_STREAM_MAX_RETRIES
    request_max_retries: int = DEFAULT_REQUEST_MAX_RETRIES
    base_instructions: str = ""
    tools: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    parallel_tool_calls: bool = False
    reasoning: dict[str, Any] | None = None
    prompt_cache_key: str | None = None
    thread_id: str = ""
    installation_id: str | None = None
    supports_images: bool = True
    # Observation masking (compactweb): the recency window (user turns, or tokens of outputs when set), and the
    # hybrid that summarises the masked history when masking alone leaves it above half the limit.
    masking_keep_turns: int = 2
    masking_keep_tokens: int | None = None
    masking_summarise: bool = False
    # The model-judged retention check after each compaction (probe questions; tokens are recorded).
    retention_probes: bool = False
    # A local summary scoring below `retention_floor` is made once more with `retry_prompt` (the better one stays).
    retention_floor: float | None = None
    retry_prompt: str | None = None
    pin_mode: str = "reinject"

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model is required")
        # Coerce plain strings (from a form or JSON) to the enums, rejecting unknown values with a clear message.
        for name, enum in (
            ("scope", Scope),
            ("strategy", StrategyPreference),
            ("remote_compaction", RemoteSupport),
        ):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, enum(value))
            except ValueError:
                choices = ", ".join(e.value for e in enum)
                raise ValueError(f"{name} must be one of {choices}, not {value!r}") from None
        if self.token_counter not in COUNTERS:
            raise ValueError(f"token_counter must be one of {', '.join(COUNTERS)}, not {self.token_counter!r}")
        for name in ("user_message_budget", "retained_message_budget", "stream_max_retries", "request_max_retries"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        # spec §12: retries are capped at 100 whatever the configuration says.
        object.__setattr__(self, "stream_max_retries", min(self.stream_max_retries, MAX_RETRIES_CAP))
        object.__setattr__(self, "request_max_retries", min(self.request_max_retries, MAX_RETRIES_CAP))
        object.__setattr__(self, "tools", tuple(self.tools))
        usable_window(self.context_window, self.effective_percent)  # validates window and percent
        auto_compact_limit(self.context_window, self.auto_compact_token_limit)

    @property
    def usable_window(self) -> int | None:
        """spec §2.2: window × effective percent / 100."""
        return usable_window(self.context_window, self.effective_percent)

    @property
    def auto_compact_limit(self) -> int | None:
        """spec §2.2: min(configured or 90%, 90%) of the window."""
        return auto_compact_limit(self.context_window, self.auto_compact_token_limit)

    def client_metadata(self, window_number: int) -> dict[str, str] | None:
        """spec §3.3: `x-codex-window-id = "<thread_id>:<window_number>"` (the compaction request carries the old
        number), plus the installation id when one is configured."""
        metadata: dict[str, str] = {}
        if self.installation_id:
            metadata["x-codex-installation-id"] = self.installation_id
        if self.thread_id:
            metadata["x-codex-window-id"] = f"{self.thread_id}:{window_number}"
        return metadata or None
