"""Driving a scenario's user-turn script: which input and events come at turn N, and when (issue 5).

Everything a step needs is a pure function of (scenario, seed, turn number), so any process (the embedded runner,
a Celery worker) can compute turn N from the persisted `state()` alone. A looping run repeats the script forever,
varying it with the scenario's substitutions and restoring the starting model and a clear fault plan at each
repeat so model downshifts and faults happen again.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compaction_app.engine.tokens import DEFAULT_ENCODING

from . import realistic_text as rt
from .scenarios import Event, ModelSwitch, Pause, Scenario, SetFaults, Turn, load_scenario
from .tools import call_rng


@dataclass(frozen=True)
class TurnStep:
    """Turn `number` (0-based, counted across repeats) = script entry `index` of repeat `iteration`.

    `events` are applied in order *before* the turn's pre-turn checks (a model switch is what the previous-model
    check of spec §2.4 step 1a then sees)."""

    number: int
    iteration: int
    index: int
    user_input: str
    events: tuple[Event, ...]

    @property
    def pause_seconds(self) -> float:
        return sum(e.seconds for e in self.events if isinstance(e, Pause))

    @property
    def model_switch(self) -> ModelSwitch | None:
        switches = [e for e in self.events if isinstance(e, ModelSwitch)]
        return switches[-1] if switches else None

    @property
    def fault_plan(self) -> SetFaults | None:
        plans = [e for e in self.events if isinstance(e, SetFaults)]
        return plans[-1] if plans else None


@dataclass(frozen=True)
class Pacing:
    """`turns_per_minute` (None: as fast as possible) measured start to start."""

    turns_per_minute: float | None = None

    def __post_init__(self) -> None:
        if self.turns_per_minute is not None and not self.turns_per_minute > 0:
            raise ValueError(f"turns_per_minute must be positive or None, got {self.turns_per_minute!r}")

    @property
    def interval(self) -> float:
        return 0.0 if self.turns_per_minute is None else 60.0 / self.turns_per_minute


def next_step_at(
    now: float,
    *,
    pacing: Pacing,
    last_started_at: float | None,
    last_finished_at: float | None,
    pause_seconds: float = 0.0,
    created_at: float | None = None,
) -> float:
    """The earliest time (>= now) the next turn may start: one pacing interval after the previous turn started,
    and at least `pause_seconds` after it finished (or, before any turn, after the run was created)."""
    earliest = now if last_started_at is None else last_started_at + pacing.interval
    if pause_seconds:
        base = last_finished_at if last_finished_at is not None else last_started_at
        base = created_at if base is None else base
        earliest = max(earliest, (now if base is None else base) + pause_seconds)
    return max(now, earliest)


class ScenarioFinished(Exception):
    """The script has no more turns (the run does not loop)."""


class ScenarioRun:
    """A run of one scenario with one seed: a cursor over its turns plus the times pacing needs."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int | str,
        loop: bool = False,
        pacing: Pacing | None = None,
        counter_name: str = DEFAULT_ENCODING,
        position: int = 0,
        created_at: float | None = None,
        last_started_at: float | None = None,
        last_finished_at: float | None = None,
    ) -> None:
        if position < 0:
            raise ValueError("position must not be negative")
        self.scenario = scenario
        self.seed = seed
        self.loop = loop
        self.pacing = pacing or Pacing()
        self.counter_name = counter_name
        self.position = position
        self.created_at = created_at
        self.last_started_at = last_started_at
        self.last_finished_at = last_finished_at
        self._steps: dict[tuple, TurnStep | None] = {}

    # --- pure look-ups ---

    def step(self, number: int) -> TurnStep | None:
        """Turn `number` of this run (None past the end of a non-looping script); the same for the same seed.
        Computed once per run object (a step is peeked, taken, then asked when the next one is due)."""
        if number < 0:
            raise ValueError("turn numbers start at 0")
        key = (number, self.seed, self.loop, self.counter_name)
        if key not in self._steps:
            if len(self._steps) > 8:
                self._steps.clear()
            self._steps[key] = self._compute_step(number)
        return self._steps[key]

    def _compute_step(self, number: int) -> TurnStep | None:
        turns = self.scenario.turns
        iteration, index = divmod(number, len(turns))
        if iteration and not self.loop:
            return None
        turn = turns[index]
        text = self._vary(turn.user, iteration)
        if turn.paste is not None:
            text += "\n\n```\n" + self._paste(turn, number) + "\n```"
        events = turn.events
        if iteration and index == 0:
            events = self._restore_events() + events
        return TurnStep(number=number, iteration=iteration, index=index, user_input=text, events=events)

    def _vary(self, text: str, iteration: int) -> str:
        if not iteration:
            return text
        for key, options in self.scenario.loop.substitutions.items():
            # One choice per repeat and key, so every turn of a repeat tells the same story.
            text = text.replace(key, call_rng(self.seed, "loop", iteration, key).choice(options))
        return text

    def _paste(self, turn: Turn, number: int) -> str:
        rng = call_rng(self.seed, "paste", number)
        budget = rt.Budget(turn.paste.sample(rng), self.counter_name)
        body = budget.fill("log", rng)
        return "\n".join(f"{ts} {line}" for ts, line in zip(rt.timestamps(rng, len(body)), body, strict=True))

    def _restore_events(self) -> tuple[Event, ...]:
        restore: list[Event] = []
        if self.scenario.model_switches:
            restore.append(ModelSwitch(self.scenario.model, self.scenario.context_window))
        if self.scenario.fault_plans:
            restore.append(SetFaults(()))
        return tuple(restore)

    def rng_for(self, *parts: object) -> random.Random:
        """A Random for something inside this run (e.g. ("tool", turn, call_id)): the same in every process."""
        return call_rng(self.seed, self.scenario.name, *parts)

    # --- the cursor ---

    @property
    def finished(self) -> bool:
        return self.step(self.position) is None

    def peek(self) -> TurnStep | None:
        """The next turn, without moving."""
        return self.step(self.position)

    def advance(self, now: float | None = None) -> TurnStep:
        """Take the next turn (recording `now` as its start); raises ScenarioFinished when there is none."""
        step = self.step(self.position)
        if step is None:
            raise ScenarioFinished(f"scenario {self.scenario.name!r} has no turn {self.position}")
        self.position += 1
        if now is not None:
            self.last_started_at = now
        return step

    def turn_finished(self, now: float) -> None:
        """Record when the turn taken last ended (pauses count from here)."""
        self.last_finished_at = now

    def next_step_at(self, now: float) -> float | None:
        """When the next turn may start (>= now), or None when the script is finished."""
        step = self.peek()
        if step is None:
            return None
        return next_step_at(
            now, pacing=self.pacing, last_started_at=self.last_started_at, last_finished_at=self.last_finished_at,
            pause_seconds=step.pause_seconds, created_at=self.created_at,
        )

    def __iter__(self) -> Iterator[TurnStep]:
        """The remaining turns (endless when looping), advancing the cursor as they are taken."""
        while not self.finished:
            yield self.advance()

    # --- persistence ---

    def state(self) -> dict[str, Any]:
        """JSON-ready state from which `from_state` rebuilds this run exactly."""
        return {
            "scenario": self.scenario.name,
            "seed": self.seed,
            "loop": self.loop,
            "turns_per_minute": self.pacing.turns_per_minute,
            "counter_name": self.counter_name,
            "position": self.position,
            "created_at": self.created_at,
            "last_started_at": self.last_started_at,
            "last_finished_at": self.last_finished_at,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], scenario: Scenario | None = None) -> ScenarioRun:
        """Rebuild a run from `state()`; the scenario is loaded by name unless given."""
        scenario = scenario or load_scenario(state["scenario"])
        return cls(
            scenario,
            seed=state["seed"],
            loop=state.get("loop", False),
            pacing=Pacing(state.get("turns_per_minute")),
            counter_name=state.get("counter_name", DEFAULT_ENCODING),
            position=state.get("position", 0),
            created_at=state.get("created_at"),
            last_started_at=state.get("last_started_at"),
            last_finished_at=state.get("last_finished_at"),
        )
