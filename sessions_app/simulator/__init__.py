"""The live session simulator's domain: scenarios as data, simulated tools, and the turn-script driver (issue 5).

Plain Python, no Django: the turn loop and the fleet runner in sessions_app wrap it.
"""

from .errors import ScenarioError, SpecError
from .initial_context import ContextWindowIds, initial_context_items
from .scenarios import (
    ModelSwitch,
    Pause,
    Scenario,
    SetFaults,
    Turn,
    UnknownScenario,
    list_scenarios,
    load_scenario,
    load_scenario_file,
)
from .script import Pacing, ScenarioFinished, ScenarioRun, TurnStep, next_step_at
from .tools import ToolResult, call_rng, dispatch_tool_call, function_call_output, tool_specs

__all__ = [
    "ContextWindowIds",
    "ModelSwitch",
    "Pacing",
    "Pause",
    "Scenario",
    "ScenarioError",
    "ScenarioFinished",
    "ScenarioRun",
    "SetFaults",
    "SpecError",
    "ToolResult",
    "Turn",
    "TurnStep",
    "UnknownScenario",
    "call_rng",
    "dispatch_tool_call",
    "function_call_output",
    "initial_context_items",
    "list_scenarios",
    "load_scenario",
    "load_scenario_file",
    "next_step_at",
    "tool_specs",
]
