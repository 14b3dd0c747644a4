"""What-if replay: run one scenario of the library with each compaction method and compare (issue 18).

A compact, pure driver (no Django, no database): the scenario's user turns against the embedded simulated model
(in-process), its simulated tools answering the model's calls, the window total kept as the sum of per-item counts
plus the base instructions, the pre-turn and mid-turn limit checks of spec §2.4, and the engine's `run_compaction`
for every compaction. Scenario events (model switches, fault plans, pauses) are not replayed: the comparison is of
methods on the same conversation.

Measured per method: compactions and failed attempts, tokens spent on model calls (every turn request's input and
output, plus compaction calls and probes), the peak window, and the mean retention score (structural check; the
model-judged check too when `probes=True`).
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from compaction_app.engine.compactor import CompactionRequest, Effects, HistorySnapshot, run_compaction
from compaction_app.engine.port import ResponsesRequest
from compaction_app.engine.provider_errors import ProviderError
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.tokens import counter
from compaction_app.engine.vocabulary import Phase
from compaction_app.engine.windows import WindowState, new_window_id
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.factory import build_client

from .initial_context import ContextWindowIds
from .scenarios import load_scenario
from .script import ScenarioRun
from .tools import dispatch_tool_call

MAX_REQUESTS_PER_TURN = 64


@dataclass(frozen=True)
class Method:
    """One row of the comparison: a strategy and the settings it runs with."""

    label: str
    strategy: str
    overrides: dict[str, Any] = field(default_factory=dict)


METHODS = (
    Method("local summary", "local"),
    Method("remote v1", "remote_v1"),
    Method("remote v2", "remote_v2"),
    Method("token budget", "token_budget"),
    Method("masking", "masking"),
    Method("masking + summary (hybrid)", "masking", {"masking_summarise": True}),
)


@dataclass
class WhatIfResult:
    scenario: str
    method: str
    turns: int = 0
    compactions: int = 0
    failures: int = 0
    turn_errors: int = 0
    tokens_spent: int = 0
    compaction_tokens: int = 0
    peak_tokens: int = 0
    scores: list[float] = field(default_factory=list)
    probe_scores: list[float] = field(default_factory=list)
    histories: list[tuple[list[dict], list[dict]]] = field(default_factory=list)

    @property
    def retention(self) -> float | None:
        return round(statistics.mean(self.scores), 3) if self.scores else None

    @property
    def probe_retention(self) -> float | None:
        return round(statistics.mean(self.probe_scores), 3) if self.probe_scores else None


class _Session:
    def __init__(self, *, initial: list[dict], settings: CompactionSettings, count) -> None:
        self.count = count
        self.items = list(initial)
        self.counts = [count(i) for i in initial]
        self.initial = list(initial)
        self.settings = settings
        self.base = counter(settings.token_counter).count_text(settings.base_instructions)
        self.window = WindowState(number=0, window_id=new_window_id(), first_window_id="",
                                  previous_window_id=None)
        self.window = replace(self.window, first_window_id=self.window.window_id)

    @property
    def total(self) -> int:
        return self.base + sum(self.counts)

    def add(self, item: dict) -> None:
        self.items.append(item)
        self.counts.append(self.count(item))

    def install(self, outcome) -> None:
        """A compaction's outcome becomes the history."""
        self.items = list(outcome.replacement_history)
        self.counts = [self.count(i) for i in self.items]
        self.window = outcome.window


async def replay(
    scenario_name: str, method: Method, *, seed: int = 1, context_window: int | None = None,
    turns: int | None = None, probes: bool = False, keep_histories: bool = False,
) -> WhatIfResult:
    scenario = load_scenario(scenario_name)
    window = context_window or scenario.context_window or 64_000
    model = scenario.model or "sim-model"
    settings = CompactionSettings(
        model=model, context_window=window, remote_compaction="v2", remote_compaction_v2=True,
        base_instructions=scenario.base_instructions, strategy=method.strategy, retention_probes=probes,
        **method.overrides,
    )
    client = build_client(ProviderConfig(name="whatif", model=model, context_window=window, remote_compaction="v2"))
    tokens = counter(settings.token_counter)
    result = WhatIfResult(scenario=scenario_name, method=method.label)
    count = turns if turns is not None else len(scenario.turns)
    run = ScenarioRun(scenario, seed=seed, loop=count > len(scenario.turns))
    tools = scenario.build_tools(seed=seed)
    specs = scenario.tool_specs()
    ids = None
    if scenario.token_budget:
        first = new_window_id()
        ids = ContextWindowIds(thread_id="whatif", first_window_id=first, current_window_id=first,
                               previous_window_id=None)
    session = _Session(initial=scenario.initial_context(ids), settings=settings, count=tokens.count_item)
    limit = settings.auto_compact_limit
    assert limit is not None

    async def compact(phase: str, turn_id: str) -> None:
        snapshot = HistorySnapshot(items=session.items, item_tokens=session.counts, active_tokens=session.total,
                                   window=session.window, turn_id=turn_id, initial_context=session.initial)
        outcome = await run_compaction(snapshot=snapshot, settings=settings, client=client,
                                       request=CompactionRequest(trigger="auto", phase=phase),
                                       effects=NO_SLEEP)
        if not outcome.ok or outcome.replacement_history is None:
            result.failures += 1
            return
        _count_compaction(result, outcome)
        if keep_histories:
            result.histories.append((list(session.items), list(outcome.replacement_history)))
        session.install(outcome)

    for number in range(count):
        step = run.step(number)
        if step is None:
            break
        turn_id = f"t{number}"
        if session.total >= limit:
            await compact(Phase.PRE_TURN, turn_id)
        session.add({"type": "message", "role": "user", "content": [{"type": "input_text", "text": step.user_input}]})
        result.turns += 1
        for request_number in range(MAX_REQUESTS_PER_TURN):
            try:
                output, spent = await _sample(client, ResponsesRequest(
                    model=model, input=session.items, instructions=settings.base_instructions, tools=specs))
            except ProviderError:  # e.g. the window exceeded: the turn fails, as in the turn loop
                result.turn_errors += 1
                break
            result.tokens_spent += spent
            calls = [i for i in output if i.get("type") == "function_call"]
            for item in output:
                session.add(item)
            for call in calls:
                session.add(dispatch_tool_call(call, tools, run.rng_for("tool", number, call["call_id"]))[0])
            result.peak_tokens = max(result.peak_tokens, session.total)
            if not calls:
                break
            if session.total >= limit:
                await compact(Phase.MID_TURN, f"{turn_id}.{request_number}")
    result.tokens_spent += result.compaction_tokens
    return result


def _count_compaction(result: WhatIfResult, outcome) -> None:
    """A compaction that installed: its calls' tokens and its retention scores."""
    result.compactions += 1
    result.compaction_tokens += outcome.call_tokens
    if outcome.retention is not None and outcome.retention.score is not None:
        result.scores.append(outcome.retention.score)
    if outcome.probe_retention is not None and outcome.probe_retention.score is not None:
        result.probe_scores.append(outcome.probe_retention.score)
        result.compaction_tokens += outcome.probe_retention.tokens_spent


async def _no_sleep(_: float) -> None:
    return None


NO_SLEEP = Effects(sleep=_no_sleep)  # a what-if replays at once: no retry backoff waits


async def _sample(client, request: ResponsesRequest) -> tuple[list[dict], int]:
    items: list[dict] = []
    spent = 0
    async for event in client.stream_response(request):
        if event.type == "response.output_item.done" and event.item is not None:
            items.append(event.item)
        elif event.type == "response.completed" and event.usage is not None:
            spent = event.usage.total_tokens
    return items, spent


def replay_all(scenarios: list[str], methods: tuple[Method, ...] = METHODS, **kwargs: Any) -> list[WhatIfResult]:
    async def go() -> list[WhatIfResult]:
        return [await replay(s, m, **kwargs) for s in scenarios for m in methods]

    return asyncio.run(go())
