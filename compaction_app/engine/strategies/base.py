"""What every strategy receives and returns (spec §4)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from compaction_app.engine.events import Emit
from compaction_app.engine.history import Injection
from compaction_app.engine.items import Item, is_model_generated
from compaction_app.engine.port import ModelClient
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.tokens import TokenCounter

# spec §6.2: backoff(n) = 200 ms × 2^(n−1) × jitter in [0.9, 1.1).
INITIAL_DELAY_S = 0.2
BACKOFF_FACTOR = 2.0


def backoff(retries: int, jitter: float) -> float:
    """Seconds to wait before retry number `retries` (spec §6.2)."""
    return INITIAL_DELAY_S * BACKOFF_FACTOR ** max(0, retries - 1) * jitter


def default_jitter() -> float:
    return random.uniform(0.9, 1.1)


@dataclass
class StrategyContext:
    """Inputs of one strategy run. `items` is the snapshot's history: strategies never mutate it."""

    items: list[Item]
    item_tokens: list[int] | None
    active_tokens: int
    initial_context: list[Item]
    window_number: int
    settings: CompactionSettings
    injection: Injection
    client: ModelClient | None
    emit: Emit
    counter: TokenCounter
    sleep: Callable[[float], Awaitable[None]]
    jitter: Callable[[], float] = default_jitter
    extra_instructions: str | None = None

    def item_token_list(self) -> list[int]:
        if self.item_tokens is not None:
            return self.item_tokens
        return [self.counter.count_item(i) for i in self.items]

    def tokens_after_last_model_item(self, tokens: list[int]) -> int:
        """Tokens of the items after the newest model-generated item (spec §3.2, §6.3 cap)."""
        total = 0
        for item, n in zip(reversed(self.items), reversed(tokens), strict=True):
            if is_model_generated(item):
                break
            total += n
        return total


@dataclass
class StrategyResult:
    """A successful implementation run, before window advance and hooks."""

    replacement_history: list[Item]
    message: str
    summary_text: str | None = None
    output_items: list[Item] = field(default_factory=list)
    retries: int = 0
    tokens_before: int | None = None
    compaction_summary_tokens: int | None = None
    cached_input_tokens: int | None = None
    retained_image_count: int | None = None
    reference_context_set: bool = False
    trimmed_items: int = 0
    rewritten_outputs: int = 0
    # Tokens the model call(s) of this compaction spent (server usage: input + output), 0 with no call.
    call_tokens: int = 0
    # The summarisation prompt the model was sent (before any extra instructions); None: the method sent none.
    prompt: str | None = None
    # The same call's input and output tokens (server usage), recorded in the rollout as a usage line.
    call_input_tokens: int = 0
    call_output_tokens: int = 0
