"""How Codex ran each compaction of a rollout, inferred from what the rollout says (issue 13, item 2).

Codex does not write the implementation, phase or trigger of a compaction into its `compacted` line, so an
importer infers them, and says how (`Labels.inferred` maps each field to the evidence):

- implementation: a non-empty `message` is a local summary (`responses`); an opaque `compaction` item in the
  replacement history is remote: v2 (`responses_compaction_v2`, a streamed `/responses` turn ending in
  `compaction_trigger`) when the line carries a `compaction_response_id` or a `compaction_trigger` item was
  recorded, else v1 (`responses_compact`); neither is a token-budget window change.
- phase: inside a turn (between `task_started`/`turn_started` and its completion), after that turn's user message
  and some model output → `mid_turn`; before the turn's user message → `pre_turn`; a turn with no user message
  at all around the compaction → `standalone_turn` (Codex's `/compact`).
- trigger / reason: a standalone compaction turn is `manual` / `user_requested`; others are `auto` /
  `context_limit`.
- context window: the newest `model_context_window` before the compaction, from a `token_count` event or a
  `turn_context` line (Codex writes the usable window there: the model's window times its effective percent).

Plain Python, no Django: `infer_labels` reads the parsed lines (`RolloutLine`) in file order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compaction_app.engine.items import is_real_user_message
from compaction_app.engine.vocabulary import Phase
from sessions_app.codex_rollout.parse import (
    COMPACTED,
    EVENT_MSG,
    RESPONSE_ITEM,
    TURN_COMPLETE_TYPES,
    TURN_CONTEXT,
    TURN_STARTED_TYPES,
    USER_MESSAGE,
    RolloutLine,
)

LOCAL = ("responses", "local")
REMOTE_V1 = ("responses_compact", "remote_v1")
REMOTE_V2 = ("responses_compaction_v2", "remote_v2")
TOKEN_BUDGET = ("token_budget", "token_budget")
TURN_ENDED_TYPES = TURN_COMPLETE_TYPES | {"turn_aborted"}


@dataclass
class Labels:
    """One compaction's labels and, per field, how they were inferred."""

    implementation: str
    strategy: str
    phase: str
    trigger: str
    reason: str
    context_window: int | None = None
    inferred: dict[str, str] = field(default_factory=dict)


def _has_compaction_item(payload: dict[str, Any]) -> bool:
    return any(isinstance(i, dict) and i.get("type") in ("compaction", "compaction_summary")
               for i in payload.get("replacement_history") or [])


def implementation_of(payload: dict[str, Any], *, trigger_seen: bool = False) -> tuple[tuple[str, str], str]:
    """((implementation, strategy), evidence) of one `compacted` payload."""
    if payload.get("message") or payload.get("legacy_rebuilt"):
        return LOCAL, "the compacted line carries a summary message: local summarization"
    if _has_compaction_item(payload):
        if payload.get("compaction_response_id") or trigger_seen:
            return REMOTE_V2, ("an opaque compaction item in the replacement history, produced by a streamed "
                               "response (compaction_response_id): remote v2")
        return REMOTE_V1, "an opaque compaction item in the replacement history and no streamed response: remote v1"
    return TOKEN_BUDGET, "no summary and no compaction item: a token-budget window change"


def _is_user_turn_item(line: RolloutLine) -> bool:
    if line.kind == EVENT_MSG:
        return line.payload.get("type") == USER_MESSAGE
    return False


def _is_real_user_message(line: RolloutLine) -> bool:
    if line.kind != RESPONSE_ITEM:
        return False
    try:
        return is_real_user_message(line.payload)
    except (AttributeError, TypeError):  # a malformed item (reported by the importer's validation)
        return False


def _window_from(line: RolloutLine) -> int | None:
    payload = line.payload
    if line.kind == EVENT_MSG and payload.get("type") == "token_count":
        value = (payload.get("info") or {}).get("model_context_window")
    elif line.kind == TURN_CONTEXT:
        value = payload.get("model_context_window")
    else:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class Labeler:
    """Infers labels line by line, so a big file can be fed in chunks; `feed` returns the labels of the
    compacted lines it saw (a standalone turn relabels them when it ends, later: the objects are shared)."""

    def __init__(self) -> None:
        self.window: int | None = None
        self.window_source = ""
        self.in_turn = False
        self.turn_has_user = False
        self.turn_has_output = False
        self.trigger_seen = False
        self.pending: list[Labels] = []  # compactions of the open turn whose phase waits for its end

    def feed(self, lines: Iterable[RolloutLine]) -> dict[int, Labels]:
        out: dict[int, Labels] = {}
        for line in lines:
            labels = self._line(line)
            if labels is not None:
                out[line.line_no] = labels
        return out

    def _line(self, line: RolloutLine) -> Labels | None:
        seen_window = _window_from(line)
        if seen_window is not None:
            self.window, self.window_source = seen_window, f"{line.kind} line {line.line_no}"
        event = line.payload.get("type") if line.kind == EVENT_MSG else None
        if event in TURN_STARTED_TYPES:
            self.in_turn, self.turn_has_user, self.turn_has_output, self.pending = True, False, False, []
            return None
        if event in TURN_ENDED_TYPES:
            if not self.turn_has_user:
                for labels in self.pending:
                    _standalone(labels)
            self.in_turn, self.pending = False, []
            return None
        if line.kind == RESPONSE_ITEM:
            if line.payload.get("type") == "compaction_trigger":
                self.trigger_seen = True
            elif _is_real_user_message(line):
                self.turn_has_user, self.turn_has_output = True, False
            elif line.payload.get("type") != "message" or line.payload.get("role") == "assistant":
                self.turn_has_output = self.turn_has_output or self.turn_has_user
        elif _is_user_turn_item(line):
            self.turn_has_user = True
        if line.kind != COMPACTED:
            return None
        (implementation, strategy), why = implementation_of(line.payload, trigger_seen=self.trigger_seen)
        self.trigger_seen = False
        labels = Labels(implementation=implementation, strategy=strategy, phase=Phase.PRE_TURN, trigger="auto",
                        reason="context_limit", context_window=self.window, inferred={"implementation": why})
        if self.in_turn and self.turn_has_user and self.turn_has_output:
            labels.phase = Phase.MID_TURN
            labels.inferred["phase"] = "after the turn's user message and model output: mid-turn"
        elif self.in_turn:
            labels.inferred["phase"] = "inside a turn, before its user message: pre-turn"
            self.pending.append(labels)
        else:
            labels.inferred["phase"] = "between turns: pre-turn of the next turn"
        labels.inferred["trigger"] = "an automatic compaction (the turn has a user message): auto, context limit"
        if self.window is not None:
            labels.inferred["context_window"] = f"model_context_window {self.window} from the {self.window_source}"
        return labels


def infer_labels(lines: Iterable[RolloutLine]) -> dict[int, Labels]:
    """Labels of every `compacted` line, keyed by its line number."""
    return Labeler().feed(lines)


def _standalone(labels: Labels) -> None:
    labels.phase, labels.trigger, labels.reason = Phase.STANDALONE_TURN, "manual", "user_requested"
    labels.inferred["phase"] = "a turn with no user message: a standalone compaction turn"
    labels.inferred["trigger"] = "a standalone compaction turn is asked for (Codex's /compact): manual"


def latest_context_window(lines: Iterable[RolloutLine]) -> int | None:
    """The newest `model_context_window` the rollout reports, if any."""
    window = None
    for line in lines:
        window = _window_from(line) or window
    return window
