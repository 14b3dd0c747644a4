"""The single entry point of the engine: one compaction, from a history snapshot to an outcome (spec §4 common
frame, §6.4, §7, §9, §10, §11).

The engine never installs anything: it returns the replacement history, the CompactedItem fields and the new window
for the caller to persist in one transaction. On any failure the outcome carries the error and the caller's history
is exactly what it was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from compaction_app.engine.analytics import AttemptClock, AttemptKey, AttemptRecord
from compaction_app.engine.errors import CompactionConfigError, CompactionError, EngineErrorKind
from compaction_app.engine.events import (
    ContextCompacted,
    Emit,
    Error,
    Event,
    EventLog,
    ItemCompleted,
    ItemStarted,
    TokenCount,
    TurnAborted,
    TurnComplete,
    TurnStarted,
    Warning,
)
from compaction_app.engine.history import Injection
from compaction_app.engine.hooks import HookContext, HookRunner, HookRunRecord, hook_request
from compaction_app.engine.items import Item
from compaction_app.engine.pins import Pin, apply_pins
from compaction_app.engine.port import ModelClient
from compaction_app.engine.prompts import HEADS_UP_WARNING, remote_error_text
from compaction_app.engine.provider_errors import ErrorKind
from compaction_app.engine.retention.facts import ProbeFact
from compaction_app.engine.retention.probes import model_judged_check
from compaction_app.engine.retention.score import RetentionScore, facts_that_left, structural_check
from compaction_app.engine.select import select_strategy
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.strategies.base import StrategyContext, StrategyResult, default_jitter
from compaction_app.engine.strategies.local import run_local
from compaction_app.engine.strategies.masking import MaskingOptions, run_masking
from compaction_app.engine.strategies.remote_v1 import run_remote_v1
from compaction_app.engine.strategies.remote_v2 import run_remote_v2
from compaction_app.engine.strategies.token_budget import run_token_budget
from compaction_app.engine.tokens import TokenCounter, counter
from compaction_app.engine.vocabulary import (
    IMPLEMENTATIONS,
    MODEL_SWITCH_REASONS,
    AttemptStatus,
    HookEvent,
    Implementation,
    Phase,
    PinMode,
    Reason,
    Strategy,
    Trigger,
)
from compaction_app.engine.windows import WindowState, new_window_id

RUNNERS = {
    Strategy.LOCAL: run_local,
    Strategy.REMOTE_V1: run_remote_v1,
    Strategy.REMOTE_V2: run_remote_v2,
    Strategy.TOKEN_BUDGET: run_token_budget,
    Strategy.MASKING: lambda ctx: run_masking(ctx, masking_options(ctx.settings)),
}


def masking_options(settings: CompactionSettings) -> MaskingOptions:
    return MaskingOptions(keep_turns=settings.masking_keep_turns, keep_tokens=settings.masking_keep_tokens,
                          summarise_when_short=settings.masking_summarise)


def needs_client(strategy: Strategy, settings: CompactionSettings) -> bool:
    """Whether a compaction with this strategy calls the model (token budget and plain masking do not, unless the
    model-judged retention check is on)."""
    if settings.retention_probes:
        return True
    if strategy is Strategy.TOKEN_BUDGET:
        return False
    return not (strategy is Strategy.MASKING and not settings.masking_summarise)


@dataclass(frozen=True)
class HistorySnapshot:
    """The session as the compaction sees it. Never mutated by the engine.

    `initial_context` is the full initial context rendered for the current turn (developer bundle, AGENTS.md,
    environment...): injected for BeforeLastUserMessage and used as the whole new window by token budget.
    `item_tokens` (one count per item, from the session's meter) saves recounting a long history.
    """

    items: list[Item]
    active_tokens: int
    window: WindowState
    turn_id: str
    initial_context: list[Item] = field(default_factory=list)
    item_tokens: list[int] | None = None
    prefill: int | None = None
    pins: list[Pin] = field(default_factory=list)
    # Facts the session's previous compaction still held: the retention score is cumulative (docs/retention.md).
    carried: list[ProbeFact] = field(default_factory=list)
    session_id: str = ""
    cwd: str = ""
    transcript_path: str | None = None


@dataclass(frozen=True)
class CompactionRequest:
    """What was asked. Defaults follow spec §2.1/§2.4: manual → standalone_turn / user_requested; auto →
    context_limit; injection BeforeLastUserMessage for mid_turn, DoNotInject otherwise (§5.3)."""

    trigger: Trigger
    phase: Phase | None = None
    reason: Reason | None = None
    injection: Injection | None = None
    strategy: str | None = None
    extra_instructions: str | None = None

    def __post_init__(self) -> None:
        trigger = Trigger(self.trigger)
        object.__setattr__(self, "trigger", trigger)
        phase = Phase(self.phase) if self.phase is not None else (
            Phase.STANDALONE_TURN if trigger is Trigger.MANUAL else None
        )
        if phase is None:
            raise CompactionConfigError("an automatic compaction needs a phase: pre_turn or mid_turn")
        object.__setattr__(self, "phase", phase)
        reason = Reason(self.reason) if self.reason is not None else (
            Reason.USER_REQUESTED if trigger is Trigger.MANUAL else Reason.CONTEXT_LIMIT
        )
        if reason in MODEL_SWITCH_REASONS and (trigger is not Trigger.AUTO or phase is not Phase.PRE_TURN):
            raise CompactionConfigError(f"reason {reason.value} only applies to an automatic pre_turn compaction")
        object.__setattr__(self, "reason", reason)
        injection = Injection(self.injection) if self.injection is not None else (
            Injection.BEFORE_LAST_USER_MESSAGE if phase is Phase.MID_TURN else Injection.DO_NOT_INJECT
        )
        object.__setattr__(self, "injection", injection)


@dataclass(frozen=True)
class CompactionOutcome:
    """The result of one compaction. `ok` False means nothing is to be installed; `error` says why."""

    ok: bool
    item_id: str
    strategy: Strategy
    implementation: Implementation
    trigger: Trigger
    reason: Reason
    phase: Phase
    injection: Injection
    window: WindowState
    tokens_before: int
    tokens_after: int
    attempts: list[AttemptRecord]
    hook_runs: list[HookRunRecord]
    events: list[Event]
    replacement_history: list[Item] | None = None
    message: str = ""
    summary_text: str | None = None
    output_items: list[Item] = field(default_factory=list)
    reference_context_set: bool = False
    prefill_cleared: bool = False
    error: CompactionError | None = None
    post_compact_stopped: bool = False
    stop_reason: str | None = None
    model: str = ""
    model_fallback: dict[str, str] | None = None
    # compactweb additions: what the new window retains (structural check, and the model-judged one when the
    # policy enables it), the tokens the compaction's model calls spent, and how many outputs masking replaced.
    retention: RetentionScore | None = None
    probe_retention: RetentionScore | None = None
    call_tokens: int = 0
    call_input_tokens: int = 0
    call_output_tokens: int = 0
    masked_outputs: int = 0
    retention_retry: dict[str, Any] | None = None
    # The summarisation prompt the installed window was made with (the retry prompt when its summary was kept);
    # None when the method sent no prompt (remote, token budget, plain masking).
    prompt: str | None = None

    @property
    def status(self) -> AttemptStatus:
        if self.ok:
            return AttemptStatus.COMPLETED
        if self.error is not None and self.error.kind == EngineErrorKind.INTERRUPTED.value:
            return AttemptStatus.INTERRUPTED
        return AttemptStatus.FAILED

    def compacted_item(self) -> dict[str, Any]:
        """The rollout `compacted` payload (spec §1.5): message, the installed history, window fields."""
        if not self.ok or self.replacement_history is None:
            raise ValueError("a failed compaction has no CompactedItem")
        return {"message": self.message, "replacement_history": self.replacement_history,
                **self.window.compacted_fields()}


def _history_tokens(items: list[Item], settings: CompactionSettings, token_counter: TokenCounter) -> int:
    """Tokens of an installed history the way `recompute_token_usage` estimates it: base instructions plus every
    item (spec §3.1, §3.2)."""
    return token_counter.count_text(settings.base_instructions) + sum(token_counter.count_item(i) for i in items)


@dataclass(frozen=True, kw_only=True)
class Effects:
    """The time, randomness and ids a compaction takes from the world, injected together so a test (or the
    service, which fixes the ids it planned) replaces them at once."""

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    jitter: Callable[[], float] = default_jitter
    new_id: Callable[[], str] = new_window_id
    new_item_id: Callable[[], str] = new_window_id


REAL_EFFECTS = Effects()


async def run_compaction(
    *,
    snapshot: HistorySnapshot,
    settings: CompactionSettings,
    request: CompactionRequest,
    client: ModelClient | None,
    hooks: HookRunner | None = None,
    emit: Emit | None = None,
    fallback_settings: CompactionSettings | None = None,
    token_counter: TokenCounter | None = None,
    effects: Effects = REAL_EFFECTS,
) -> CompactionOutcome:
    """Run one compaction with the common frame of spec §4: analytics attempt start → PreCompact hooks (a stop ends
    it as `interrupted`, nothing changes) → ItemStarted → implementation → window advance (§9) → TokenCount →
    ItemCompleted + ContextCompacted (→ Warning for local) → PostCompact hooks → analytics record. Standalone
    (manual) compactions are wrapped in TurnStarted … TurnComplete (§2.4.3, §11).

    `settings` describe the model that compacts (the previous model for model_downshift / comp_hash_changed);
    `fallback_settings` the current model, used once if that fails with an invalid request (§6.4).
    Raises CompactionConfigError, before anything happens, for requests that cannot run.
    """
    strategy = _checked_strategy(snapshot=snapshot, settings=settings, request=request, client=client)
    assert request.phase is not None and request.reason is not None and request.injection is not None
    implementation = IMPLEMENTATIONS[strategy]
    run = _Run(
        snapshot=snapshot, settings=settings, request=request, client=client, strategy=strategy,
        implementation=implementation, log=EventLog(emit), hooks=hooks or HookRunner(),
        token_counter=token_counter or counter(settings.token_counter), sleep=effects.sleep,
        jitter=effects.jitter, item_id=effects.new_item_id(),
    )
    if run.standalone:
        run.log(TurnStarted(turn_id=snapshot.turn_id, model_context_window=settings.usable_window))
    attempt = AttemptClock(
        key=AttemptKey(thread_id=settings.thread_id, turn_id=snapshot.turn_id, trigger=request.trigger,
                       reason=request.reason.value, implementation=implementation, phase=request.phase,
                       model=settings.model),
        tokens_before=snapshot.active_tokens, clock=effects.clock, monotonic=effects.monotonic,
    )

    pre = await run.run_hooks(HookEvent.PRE_COMPACT, settings.model)
    if pre.stopped:
        return run.interrupted(attempt, pre.stop_reason)

    run.log(ItemStarted(item_id=run.item_id))
    result, error, used_settings, fallback_info = await _run_strategy(run, fallback_settings)
    if error is not None or result is None:
        assert error is not None
        return run.failed(attempt, error, fallback_info)
    new_window = snapshot.window.advance(effects.new_id)
    return await _completed(run, attempt, result, used_settings, fallback_info, new_window=new_window)


def _checked_strategy(*, snapshot: HistorySnapshot, settings: CompactionSettings, request: CompactionRequest,
                      client: ModelClient | None) -> Strategy:
    """The strategy the request runs, or CompactionConfigError for a request that cannot run."""
    strategy = select_strategy(settings, request.strategy)
    if request.extra_instructions and request.extra_instructions.strip() and strategy is not Strategy.LOCAL:
        raise CompactionConfigError(
            "extra instructions apply to local summarization only: remote and token-budget compaction send no "
            "prompt"
        )
    if needs_client(strategy, settings) and client is None:
        raise CompactionConfigError(f"strategy {strategy.value} needs a model client")
    if snapshot.item_tokens is not None and len(snapshot.item_tokens) != len(snapshot.items):
        raise CompactionConfigError("item_tokens must have one count per item")
    if snapshot.active_tokens < 0:
        raise CompactionConfigError("active_tokens must be >= 0")
    return strategy


@dataclass
class _Run:
    """One compaction in flight: what every step of `run_compaction` reads, and the hook runs and events so far."""

    snapshot: HistorySnapshot
    settings: CompactionSettings
    request: CompactionRequest
    client: ModelClient | None
    strategy: Strategy
    implementation: Implementation
    log: EventLog
    hooks: HookRunner
    token_counter: TokenCounter
    sleep: Callable[[float], Awaitable[None]]
    jitter: Callable[[], float]
    item_id: str
    hook_runs: list[HookRunRecord] = field(default_factory=list)

    @property
    def standalone(self) -> bool:
        return self.request.phase is Phase.STANDALONE_TURN

    def outcome(self, **kwargs: Any) -> CompactionOutcome:
        request = self.request
        base: dict[str, Any] = dict(
            item_id=self.item_id, strategy=self.strategy, implementation=self.implementation,
            trigger=request.trigger, reason=request.reason, phase=request.phase, injection=request.injection,
            hook_runs=self.hook_runs, events=self.log.events, model=self.settings.model,
        )
        base.update(kwargs)
        return CompactionOutcome(**base)

    async def run_hooks(self, event: HookEvent, model: str, status: str | None = None):
        snapshot, request = self.snapshot, self.request
        context = HookContext(
            session_id=snapshot.session_id or self.settings.thread_id, turn_id=snapshot.turn_id, cwd=snapshot.cwd,
            transcript_path=snapshot.transcript_path, trigger=request.trigger.value, reason=request.reason.value,
            phase=request.phase.value, implementation=self.implementation.value,
        )
        payload = hook_request(event=event, context=context, model=model, status=status)
        ran = await self.hooks.run(event, payload, self.log)
        self.hook_runs.extend(ran.records)
        return ran

    def context_for(self, settings: CompactionSettings) -> StrategyContext:
        snapshot = self.snapshot
        return StrategyContext(
            items=snapshot.items, item_tokens=snapshot.item_tokens, active_tokens=snapshot.active_tokens,
            initial_context=snapshot.initial_context, window_number=snapshot.window.number, settings=settings,
            injection=self.request.injection, client=self.client, emit=self.log, counter=self.token_counter,
            sleep=self.sleep, jitter=self.jitter, extra_instructions=self.request.extra_instructions,
        )

    def interrupted(self, attempt: AttemptClock, stop_reason: str | None) -> CompactionOutcome:
        """A PreCompact hook stopped the compaction: nothing changes."""
        active = self.snapshot.active_tokens
        error = CompactionError(kind=EngineErrorKind.INTERRUPTED.value,
                                message=stop_reason or "PreCompact hook stopped execution")
        record = attempt.finish(status=AttemptStatus.INTERRUPTED, tokens_after=active, error=error)
        if self.standalone:
            self.log(TurnAborted(turn_id=self.snapshot.turn_id))
        return self.outcome(ok=False, window=self.snapshot.window, tokens_before=active, tokens_after=active,
                            attempts=[record], error=error, stop_reason=stop_reason)

    def failed(self, attempt: AttemptClock, error: CompactionError,
               fallback_info: dict[str, str] | None) -> CompactionOutcome:
        active = self.snapshot.active_tokens
        tokens_after = error.active_tokens_after if error.active_tokens_after is not None else active
        record = attempt.finish(status=AttemptStatus.FAILED, tokens_after=tokens_after, error=error,
                                model_fallback=fallback_info is not None)
        if self.strategy.is_remote:
            self.log(Error(message=remote_error_text(error.message), codex_error_info=error.kind,
                           http_status=error.http_status))
        if self.standalone:
            self.log(TurnComplete(turn_id=self.snapshot.turn_id))
        return self.outcome(ok=False, window=self.snapshot.window, tokens_before=active, tokens_after=tokens_after,
                            attempts=[record], error=error, model_fallback=fallback_info)


async def _run_strategy(
    run: _Run, fallback_settings: CompactionSettings | None,
) -> tuple[StrategyResult | None, CompactionError | None, CompactionSettings, dict[str, str] | None]:
    """The implementation's result (or its error), the settings that produced it and the model fallback's record."""
    strategy, reason = run.strategy, run.request.reason
    used_settings = run.settings
    fallback_info: dict[str, str] | None = None
    result: StrategyResult | None = None
    error: CompactionError | None = None
    try:
        result = await RUNNERS[strategy](run.context_for(run.settings))
    except CompactionError as exc:
        error = exc
    if (
        error is not None
        and strategy.is_remote
        and fallback_settings is not None
        and reason in MODEL_SWITCH_REASONS
        and error.kind == ErrorKind.INVALID_REQUEST.value
    ):
        # spec §6.4 (primary snapshot): one retry with the current model, same item id; if it fails too the
        # original error is returned.
        try:
            result = await RUNNERS[strategy](run.context_for(fallback_settings))
            used_settings = fallback_settings
            fallback_info = {"reason": reason.value, "implementation": run.implementation.value,
                             "outcome": "succeeded"}
            error = None
        except CompactionError:
            fallback_info = {"reason": reason.value, "implementation": run.implementation.value, "outcome": "failed"}
    return result, error, used_settings, fallback_info


@dataclass
class _Kept:
    """The window a successful summary leaves, with what it retains and what its model calls cost."""

    result: StrategyResult
    history: list[Item]
    facts: list
    retention: RetentionScore
    call_tokens: int
    call_input_tokens: int
    call_output_tokens: int
    retry: dict[str, Any] | None = None


def _window_of(run: _Run, result: StrategyResult, settings: CompactionSettings) -> _Kept:
    snapshot = run.snapshot
    history = apply_pins(result.replacement_history, snapshot.pins, PinMode(settings.pin_mode))
    facts = facts_that_left(snapshot.items, history, [p.fact() for p in snapshot.pins], snapshot.carried)
    return _Kept(result=result, history=history, facts=facts, retention=structural_check(facts, history),
                 call_tokens=result.call_tokens, call_input_tokens=result.call_input_tokens,
                 call_output_tokens=result.call_output_tokens)


async def _retried_if_low(run: _Run, kept: _Kept, settings: CompactionSettings) -> _Kept:
    """The policy's action on a low retention score: summarise once more with its retry prompt, keep the better
    window; the calls of both count."""
    floor, score = settings.retention_floor, kept.retention.score
    if not (settings.retry_prompt and floor is not None and score is not None and score < floor
            and run.strategy is Strategy.LOCAL):
        return kept
    retry: dict[str, Any] = {"score_before": score, "score_after": None}
    try:
        second = await run_local(run.context_for(replace(settings, compact_prompt=settings.retry_prompt)))
    except CompactionError as exc:
        retry["error"] = exc.message
        return replace(kept, retry=retry)
    again = _window_of(run, second, settings)
    retry["score_after"] = again.retention.score
    better = (again.retention.score or 0) > score
    retry["kept"] = "retry" if better else "first"
    chosen = again if better else kept
    return replace(chosen, retry=retry, call_tokens=kept.call_tokens + again.call_tokens,
                   call_input_tokens=kept.call_input_tokens + again.call_input_tokens,
                   call_output_tokens=kept.call_output_tokens + again.call_output_tokens)


async def _completed(run: _Run, attempt: AttemptClock, result: StrategyResult, used_settings: CompactionSettings,
                     fallback_info: dict[str, str] | None, *, new_window: WindowState) -> CompactionOutcome:
    """Retention, the closing events and the PostCompact hooks of a compaction whose implementation succeeded."""
    snapshot, log = run.snapshot, run.log
    kept = await _retried_if_low(run, _window_of(run, result, used_settings), used_settings)
    result, history = kept.result, kept.history
    probe_retention = None
    if used_settings.retention_probes and run.client is not None and kept.facts:
        try:
            probe_retention = (await model_judged_check(facts=kept.facts, after=history, client=run.client,
                                                        model=used_settings.model,
                                                        instructions=used_settings.base_instructions)
                               ).compared_with(kept.retention)
        except Exception as exc:  # a failed probe never fails the compaction; the structural score stands
            log(Warning(message=f"retention probes failed: {exc}"))
    tokens_after = _history_tokens(history, used_settings, run.token_counter)
    log(TokenCount(total_tokens=tokens_after, model_context_window=used_settings.usable_window, source="estimate"))
    log(ItemCompleted(item_id=run.item_id))
    log(ContextCompacted())
    if run.strategy is Strategy.LOCAL:
        log(Warning(message=HEADS_UP_WARNING))

    post = await run.run_hooks(HookEvent.POST_COMPACT, used_settings.model, AttemptStatus.COMPLETED.value)
    record = attempt.finish(status=AttemptStatus.COMPLETED, tokens_after=tokens_after, result=result,
                            model_fallback=fallback_info is not None, model=used_settings.model)
    if run.standalone:
        log(TurnAborted(turn_id=snapshot.turn_id) if post.stopped else TurnComplete(turn_id=snapshot.turn_id))
    return run.outcome(
        ok=True, window=new_window, tokens_before=snapshot.active_tokens, tokens_after=tokens_after,
        attempts=[record], replacement_history=history, message=result.message, summary_text=result.summary_text,
        output_items=result.output_items, reference_context_set=result.reference_context_set,
        prefill_cleared=True, post_compact_stopped=post.stopped, stop_reason=post.stop_reason,
        model=used_settings.model, model_fallback=fallback_info, retention=kept.retention,
        probe_retention=probe_retention, call_tokens=kept.call_tokens, retention_retry=kept.retry,
        call_input_tokens=kept.call_input_tokens, call_output_tokens=kept.call_output_tokens,
        masked_outputs=result.rewritten_outputs if run.strategy is Strategy.MASKING else 0, prompt=result.prompt,
    )
