"""The scenario library: simulated agent sessions written as data (TOML files in `scenarios/`, issue 5).

A scenario seeds a session's initial context (spec §5.3), the tools offered to the model and their output sizes,
and a script of user turns with optional per-turn events (a model switch, a fault plan, a pause). Files are
validated on load; every error names the file and the field. The schema is documented in docs/simulator.md.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from compaction_app.engine.items import Item
from compaction_app.engine.tokens import DEFAULT_ENCODING

from .distributions import SizeDistribution, parse_distribution
from .errors import ScenarioError, SpecError
from .initial_context import DEFAULT_PERMISSIONS, ContextWindowIds, initial_context_items
from .tools import ToolSettings, build_tools, parse_tool_settings, tool_specs

SCENARIO_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# A fault is what the simulated provider reads from its fault header: a name, then `;key=value` parameters.
FAULT_SPEC = re.compile(r"^[a-z][a-z0-9_-]*(;[a-z][a-z0-9_-]*=[A-Za-z0-9_.:-]+)*$")
FAULT_SCOPES = ("any", "compaction")

DEFAULT_BASE_INSTRUCTIONS = (
    "You are a coding agent working in the user's repository through a terminal. Read the code before you change "
    "it, run the tests after you change it, keep the user informed with short updates, and finish each task with a "
    "concise summary of what you changed and why."
)


@dataclass(frozen=True)
class ModelSwitch:
    """Before the turn, the session moves to `model` with a `context_window`-token window (spec §2.4 step 1a)."""

    model: str
    context_window: int
    type: str = field(default="model_switch", init=False)


@dataclass(frozen=True)
class SetFaults:
    """Before the turn, the simulated provider's fault plan becomes `faults` (empty clears it).

    `scope` says which requests carry the faults: "any" (every request), or "compaction" (only compaction requests:
    summarisation, /responses/compact, v2 triggers)."""

    faults: tuple[str, ...]
    scope: str = "any"
    type: str = field(default="faults", init=False)

    def header_value(self) -> str:
        """The value of the simulated provider's fault header: the specs joined by ', '."""
        return ", ".join(self.faults)


@dataclass(frozen=True)
class Pause:
    """Wait `seconds` before the turn (as a user would), on top of the pacing interval."""

    seconds: float
    type: str = field(default="pause", init=False)


Event = ModelSwitch | SetFaults | Pause


@dataclass(frozen=True)
class Turn:
    """One scripted user turn: the message, an optional pasted log of a drawn size, and events before it."""

    user: str
    events: tuple[Event, ...] = ()
    paste: SizeDistribution | None = None


@dataclass(frozen=True)
class LoopSpec:
    """How a looping run varies the script: each repeat swaps every key for one of its alternatives."""

    substitutions: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    description: str
    source: str
    cwd: str
    agents_md: str
    turns: tuple[Turn, ...]
    tools: Mapping[str, ToolSettings]
    permissions: str = DEFAULT_PERMISSIONS
    shell: str = "bash"
    base_instructions: str = DEFAULT_BASE_INSTRUCTIONS
    model: str | None = None
    context_window: int | None = None
    token_budget: bool = False
    loop: LoopSpec = field(default_factory=LoopSpec)

    def initial_context(self, window_ids: ContextWindowIds | None = None) -> list[Item]:
        """The initial-context items (spec §5.3); token-budget scenarios need the window ids (spec §4.4)."""
        if self.token_budget and window_ids is None:
            raise ValueError(f"scenario {self.name!r} uses the token budget: pass window_ids for <context_window>")
        return initial_context_items(
            cwd=self.cwd, agents_md=self.agents_md, permissions=self.permissions, shell=self.shell,
            window_ids=window_ids,
        )

    def build_tools(self, *, seed: int | str, counter_name: str = DEFAULT_ENCODING) -> dict[str, Any]:
        """The simulated tools of this scenario, by name (see tools.py)."""
        return build_tools(self.tools, seed=seed, cwd=self.cwd, counter_name=counter_name)

    def tool_specs(self) -> list[dict[str, Any]]:
        """The Responses `tools` array offered to the model."""
        return tool_specs(self.build_tools(seed=0))

    @property
    def model_switches(self) -> bool:
        return any(isinstance(e, ModelSwitch) for t in self.turns for e in t.events)

    @property
    def fault_plans(self) -> bool:
        return any(isinstance(e, SetFaults) for t in self.turns for e in t.events)


# --- validation helpers -------------------------------------------------------------------------------------------------

def _check_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise SpecError(f"{where}.{extra[0]}" if where else extra[0], f"is not a known field ({', '.join(sorted(allowed))})")


def _text(data: Mapping[str, Any], key: str, where: str, *, required: bool = True, default: str = "") -> str:
    path = f"{where}.{key}" if where else key
    if key not in data:
        if required:
            raise SpecError(path, "is required")
        return default
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise SpecError(path, f"must be a non-empty string, got {value!r}")
    return value


def _table(data: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> Mapping[str, Any]:
    path = f"{where}.{key}" if where else key
    if key not in data:
        if required:
            raise SpecError(path, "is required")
        return {}
    value = data[key]
    if not isinstance(value, Mapping):
        raise SpecError(path, f"must be a table, got {value!r}")
    return value


def _positive_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(path, f"must be a positive integer, got {value!r}")
    return value


def _parse_event(data: Any, where: str) -> Event:
    if not isinstance(data, Mapping):
        raise SpecError(where, f"must be a table with a 'type', got {data!r}")
    kind = data.get("type")
    if kind == "model_switch":
        _check_keys(data, {"type", "model", "context_window"}, where)
        if "context_window" not in data:
            raise SpecError(f"{where}.context_window", "is required")
        return ModelSwitch(_text(data, "model", where), _positive_int(data["context_window"], f"{where}.context_window"))
    if kind == "faults":
        _check_keys(data, {"type", "faults", "scope"}, where)
        faults = data.get("faults")
        if not isinstance(faults, list):
            raise SpecError(f"{where}.faults", "is required: a list of fault specs (an empty list clears the plan)")
        for i, spec in enumerate(faults):
            if not isinstance(spec, str) or not FAULT_SPEC.match(spec):
                raise SpecError(f"{where}.faults[{i}]", f"must look like 'name' or 'name;key=value', got {spec!r}")
        scope = data.get("scope", "any")
        if scope not in FAULT_SCOPES:
            raise SpecError(f"{where}.scope", f"must be one of {', '.join(FAULT_SCOPES)}, got {scope!r}")
        return SetFaults(tuple(faults), scope)
    if kind == "pause":
        _check_keys(data, {"type", "seconds"}, where)
        seconds = data.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= 86_400:
            raise SpecError(f"{where}.seconds", f"must be a number of seconds in (0, 86400], got {seconds!r}")
        return Pause(float(seconds))
    raise SpecError(f"{where}.type", f"must be one of model_switch, faults, pause, got {kind!r}")


def _parse_turn(data: Any, where: str) -> Turn:
    if not isinstance(data, Mapping):
        raise SpecError(where, f"must be a table, got {data!r}")
    _check_keys(data, {"user", "events", "paste"}, where)
    events = data.get("events", [])
    if not isinstance(events, list):
        raise SpecError(f"{where}.events", f"must be a list of event tables, got {events!r}")
    paste = parse_distribution(data["paste"], f"{where}.paste") if "paste" in data else None
    return Turn(
        user=_text(data, "user", where),
        events=tuple(_parse_event(e, f"{where}.events[{i}]") for i, e in enumerate(events)),
        paste=paste,
    )


def _parse_loop(data: Mapping[str, Any]) -> LoopSpec:
    _check_keys(data, {"substitutions"}, "loop")
    subs = data.get("substitutions", {})
    if not isinstance(subs, Mapping):
        raise SpecError("loop.substitutions", f"must be a table of word = [alternatives], got {subs!r}")
    parsed = {}
    for key, options in subs.items():
        where = f"loop.substitutions.{key}"
        if not key or not isinstance(options, list) or not options or not all(
            isinstance(o, str) and o for o in options
        ):
            raise SpecError(where, f"must be a non-empty list of non-empty strings, got {options!r}")
        parsed[key] = tuple(options)
    return LoopSpec(MappingProxyType(parsed))


TOP_LEVEL = {
    "name", "title", "description", "model", "context_window", "token_budget", "base_instructions",
    "context", "tools", "turns", "loop",
}


def parse_scenario(data: Mapping[str, Any], source: str) -> Scenario:
    """Validate parsed TOML and build a Scenario; raises ScenarioError naming `source` and the field."""
    try:
        return _parse(data, source)
    except SpecError as exc:
        raise ScenarioError(source, exc.problem, exc.field) from None


def _parse(data: Mapping[str, Any], source: str) -> Scenario:
    _check_keys(data, TOP_LEVEL, "")
    name = _text(data, "name", "")
    if not SCENARIO_NAME.match(name):
        raise SpecError("name", f"must be lowercase letters, digits and dashes, got {name!r}")
    model = _text(data, "model", "", required=False) or None
    window = _positive_int(data["context_window"], "context_window") if "context_window" in data else None
    token_budget = data.get("token_budget", False)
    if not isinstance(token_budget, bool):
        raise SpecError("token_budget", f"must be true or false, got {token_budget!r}")

    context = _table(data, "context", "")
    _check_keys(context, {"cwd", "shell", "permissions", "agents_md"}, "context")
    cwd = _text(context, "cwd", "context")
    if not cwd.startswith("/"):
        raise SpecError("context.cwd", f"must be an absolute path, got {cwd!r}")

    tools_data = _table(data, "tools", "")
    if not tools_data:
        raise SpecError("tools", "must offer at least one tool, e.g. [tools.shell]")
    tools = {n: parse_tool_settings(n, t, f"tools.{n}") for n, t in tools_data.items()}
    if token_budget and "new_context" not in tools:
        raise SpecError("tools", "a token_budget scenario must offer [tools.new_context]")
    if "new_context" in tools and not token_budget:
        raise SpecError("tools.new_context", "is only offered when token_budget = true")

    turns_data = data.get("turns")
    if not isinstance(turns_data, list) or not turns_data:
        raise SpecError("turns", "is required: at least one [[turns]] table")
    turns = tuple(_parse_turn(t, f"turns[{i}]") for i, t in enumerate(turns_data))
    scenario = Scenario(
        name=name,
        title=_text(data, "title", ""),
        description=_text(data, "description", "", required=False),
        source=source,
        cwd=cwd,
        agents_md=_text(context, "agents_md", "context"),
        permissions=_text(context, "permissions", "context", required=False, default=DEFAULT_PERMISSIONS),
        shell=_text(context, "shell", "context", required=False, default="bash"),
        base_instructions=_text(data, "base_instructions", "", required=False, default=DEFAULT_BASE_INSTRUCTIONS),
        tools=MappingProxyType(tools),
        turns=turns,
        model=model,
        context_window=window,
        token_budget=token_budget,
        loop=_parse_loop(_table(data, "loop", "", required=False)),
    )
    if scenario.model_switches and (model is None or window is None):
        # A looping run switches back to the starting model at each repeat, so it must be known.
        raise SpecError("model", "a scenario with model_switch events must set model and context_window")
    return scenario


def load_scenario_file(path: str | Path) -> Scenario:
    """Load and validate one scenario file; its `name` must equal the file's stem."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(path.name, f"cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(path.name, f"is not valid TOML: {exc}") from None
    scenario = parse_scenario(data, path.name)
    if scenario.name != path.stem:
        raise ScenarioError(path.name, f"must equal the file name {path.stem!r}, got {scenario.name!r}", "name")
    return scenario


class UnknownScenario(LookupError):
    """No shipped scenario has that name."""


def _library() -> Path:
    return Path(str(resources.files(__package__) / "scenarios"))


def list_scenarios() -> list[str]:
    """The names of the shipped scenarios, sorted."""
    return sorted(p.stem for p in _library().glob("*.toml"))


@cache
def load_scenario(name: str) -> Scenario:
    """The shipped scenario `name` (validated; cached, scenarios are immutable)."""
    if not isinstance(name, str) or not SCENARIO_NAME.match(name) or name not in list_scenarios():
        raise UnknownScenario(f"unknown scenario {name!r}; choose one of {', '.join(list_scenarios())}")
    return load_scenario_file(_library() / f"{name}.toml")
