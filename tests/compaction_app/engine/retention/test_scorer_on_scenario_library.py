"""Validation of the scorer on the scenario library (what-if replays against the embedded simulated model).

For each method the oracle is what the method provably does, not what the scorer says:
- masking never removes a call, so every file read or changed stays; an exit status whose output was masked is gone
  unless the same command with the same status is still visible unmasked;
- token budget keeps only the initial context, which holds no exit status and no user goal;
- local summarisation keeps the summary, whose format (the simulated summariser) has no exit codes.
Cost: about 6 s (two scenarios, three methods, ~20 turns each).
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from compaction_app.engine.items import message_text
from compaction_app.engine.retention.facts import FactKind, command_of, exit_code, output_text
from compaction_app.engine.retention.score import score_compaction
from compaction_app.engine.strategies.masking import is_masked
from sessions_app.simulator.whatif import METHODS, replay

SCENARIOS = ["fix-failing-test", "large-refactor"]
REPORT = re.compile(r"^- shell (\{.*\}): Exit code: (-?\d+)")


def method(label: str):
    return next(m for m in METHODS if m.label == label)


def histories(scenario: str, label: str):
    result = asyncio.run(replay(scenario, method(label), context_window=32000, turns=18, keep_histories=True))
    assert result.histories, f"{scenario}/{label} never compacted"
    return result.histories


def visible_exits(items) -> set[str]:
    """Exit statuses still stated in the window: an unmasked call/output pair, or the simulated model's own report
    line in an assistant message (`- shell {"command": "..."}: Exit code: N`)."""
    outputs = {i.get("call_id"): i for i in items if i.get("type") == "function_call_output"}
    found = set()
    for item in items:
        if item.get("type") == "message" and item.get("role") == "assistant":
            for line in message_text(item).splitlines():
                match = REPORT.match(line)
                if match:
                    command = json.loads(match.group(1))["command"]
                    command = command[-1] if isinstance(command, list) else command
                    found.add(f"exit {match.group(2)} of {command}")
    for item in items:
        command, out = command_of(item), outputs.get(item.get("call_id"))
        if command and out is not None and not is_masked(out):
            code = exit_code(output_text(out))
            if code is not None:
                found.add(f"exit {code} of {command}")
    return found


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_masking_keeps_the_file_trail_and_forgets_masked_exit_statuses(scenario):
    for before, after in histories(scenario, "masking"):
        score = score_compaction(before, after)
        still = visible_exits(after)
        for verdict in score.verdicts:
            fact = verdict.fact
            if fact.kind in (FactKind.FILE_READ, FactKind.FILE_CHANGED):
                assert verdict.kept, fact.text
            if fact.kind is FactKind.COMMAND and fact.text.startswith("exit "):
                assert verdict.kept is (fact.text in still), fact.text


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_token_budget_forgets_every_goal_and_exit_status(scenario):
    for before, after in histories(scenario, "token budget"):
        score = score_compaction(before, after)
        probed = [v for v in score.verdicts
                  if v.fact.kind is FactKind.GOAL or v.fact.text.startswith("exit ")]
        assert probed and not any(v.kept for v in probed)


def test_local_summary_forgets_exit_statuses_but_keeps_summarised_files():
    for before, after in histories("fix-failing-test", "local summary"):
        score = score_compaction(before, after)
        exits = [v for v in score.verdicts if v.fact.text.startswith("exit ")]
        assert exits and not any(v.kept for v in exits)
        files = [v for v in score.verdicts if v.fact.kind is FactKind.FILE_READ]
        assert files and all(v.kept for v in files)
