"""One analytics record per compaction attempt (spec §10)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from compaction_app.engine.vocabulary import STRATEGY_MEMENTO, AttemptStatus, Implementation, Phase, Trigger


@dataclass(frozen=True)
class AttemptRecord:
    """spec §10 (`CodexCompactionEvent`): every field Codex records, plus the model and the retry count."""

    thread_id: str
    turn_id: str
    trigger: Trigger
    reason: str
    implementation: Implementation
    phase: Phase
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
    model: str
    model_fallback: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, StrEnum) else v) for k, v in asdict(self).items()}


class AttemptClock:
    """Starts an attempt (start time, tokens before) and finishes it into an AttemptRecord (spec §10)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        thread_id: str,
        turn_id: str,
        trigger: Trigger,
        reason: str,
        implementation: Implementation,
        phase: Phase,
        tokens_before: int,
        model: str,
    ) -> None:
        self._clock, self._monotonic = clock, monotonic
        self.started_at = clock()
        self._start = monotonic()
        self.thread_id, self.turn_id = thread_id, turn_id
        self.trigger, self.reason, self.implementation, self.phase = trigger, reason, implementation, phase
        self.tokens_before = tokens_before
        self.model = model

    def finish(
        self,
        *,
        status: AttemptStatus,
        tokens_after: int,
        error_kind: str | None = None,
        http_status: int | None = None,
        error_message: str | None = None,
        tokens_before: int | None = None,
        retained_image_count: int | None = None,
        compaction_summary_tokens: int | None = None,
        cached_input_tokens: int | None = None,
        retries: int = 0,
        model_fallback: bool = False,
        implementation: Implementation | None = None,
        model: str | None = None,
    ) -> AttemptRecord:
        """`tokens_before` overrides the value captured at the start (Codex's details override)."""
        elapsed_ms = max(0, int(round((self._monotonic() - self._start) * 1000)))
        return AttemptRecord(
            thread_id=self.thread_id,
            turn_id=self.turn_id,
            trigger=self.trigger,
            reason=self.reason,
            implementation=implementation or self.implementation,
            phase=self.phase,
            strategy=STRATEGY_MEMENTO,
            status=status,
            error_kind=error_kind,
            http_status=http_status,
            error_message=error_message,
            active_context_tokens_before=self.tokens_before if tokens_before is None else tokens_before,
            active_context_tokens_after=tokens_after,
            retained_image_count=retained_image_count,
            compaction_summary_tokens=compaction_summary_tokens,
            cached_input_tokens=cached_input_tokens,
            started_at=self.started_at,
            completed_at=self._clock(),
            duration_ms=elapsed_ms,
            retries=retries,
            model=model or self.model,
            model_fallback=model_fallback,
        )
