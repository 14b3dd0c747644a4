"""One analytics record per compaction attempt (spec §10)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from compaction_app.engine.vocabulary import STRATEGY_MEMENTO, AttemptStatus, Implementation, Phase, Trigger

if TYPE_CHECKING:
    from compaction_app.engine.errors import CompactionError
    from compaction_app.engine.strategies.base import StrategyResult


@dataclass(frozen=True, kw_only=True)
class AttemptKey:
    """What an attempt is, the same at its start and in its record (spec §10)."""

    thread_id: str
    turn_id: str
    trigger: Trigger
    reason: str
    implementation: Implementation
    phase: Phase
    model: str


@dataclass(frozen=True, kw_only=True)
class AttemptRecord(AttemptKey):
    """spec §10 (`CodexCompactionEvent`): every field Codex records (the attempt's key and what became of it),
    plus the model and the retry count."""

    strategy: str
    status: AttemptStatus
    error_kind: str | None
    http_status: int | None
    error_message: str | None
    active_context_tokens_before: int
    active_context_tokens_after: int
    retained_image_count: int | None
    compaction_summary_tokens: int | None
    cached_input_tokens: int | None
    started_at: float
    completed_at: float
    duration_ms: int
    retries: int
    model_fallback: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, StrEnum) else v) for k, v in asdict(self).items()}


class AttemptClock:
    """Starts an attempt (start time, tokens before) and finishes it into an AttemptRecord (spec §10)."""

    def __init__(
        self, *, key: AttemptKey, tokens_before: int, clock: Callable[[], float], monotonic: Callable[[], float],
    ) -> None:
        self._clock, self._monotonic = clock, monotonic
        self.started_at = clock()
        self._start = monotonic()
        self.key = key
        self.tokens_before = tokens_before

    def finish(
        self,
        *,
        status: AttemptStatus,
        tokens_after: int,
        error: CompactionError | None = None,
        result: StrategyResult | None = None,
        model_fallback: bool = False,
        model: str | None = None,
    ) -> AttemptRecord:
        """The record of a failed attempt (its `error`) or a completed one (its `result`, whose `tokens_before`,
        when the implementation reports one, overrides the value captured at the start: Codex's details
        override)."""
        elapsed_ms = max(0, int(round((self._monotonic() - self._start) * 1000)))
        key = self.key
        tokens_before = result.tokens_before if result is not None else None
        ran = result if result is not None else error
        return AttemptRecord(
            **{**asdict(key), "model": model or key.model},
            strategy=STRATEGY_MEMENTO,
            status=status,
            error_kind=error.kind if error is not None else None,
            http_status=error.http_status if error is not None else None,
            error_message=error.message if error is not None else None,
            active_context_tokens_before=self.tokens_before if tokens_before is None else tokens_before,
            active_context_tokens_after=tokens_after,
            retained_image_count=result.retained_image_count if result is not None else None,
            compaction_summary_tokens=result.compaction_summary_tokens if result is not None else None,
            cached_input_tokens=result.cached_input_tokens if result is not None else None,
            started_at=self.started_at,
            completed_at=self._clock(),
            duration_ms=elapsed_ms,
            retries=ran.retries if ran is not None else 0,
            model_fallback=model_fallback,
        )
