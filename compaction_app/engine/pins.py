"""Pinned context: items or facts an operator (or a policy rule) says must survive every compaction.

A pin is a short text (a constraint, a decision, a file path). After a compaction its text must still be in the
new window; with `reinject` (the default) the replacement history gets one developer message holding every pin,
right after it (an older pinned block is replaced, never duplicated); with `check_only` nothing is added and a lost
pin is only flagged. Either way the retention scorer checks each pin as a fact of kind `pin`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from compaction_app.engine.items import Item, is_message, message_text
from compaction_app.engine.retention.facts import FactKind, ProbeFact
from compaction_app.engine.vocabulary import PinMode

PINNED_OPEN = "<pinned_context>"
PINNED_CLOSE = "</pinned_context>"
MAX_PIN_CHARS = 2000
# The pins' total token budget when the policy sets none: a small share of the usable window (pins ride on every
# request, and a window full of pins has no room left to work: issue 32 saw 80 pins push 22k tokens to 43.8k).
DEFAULT_PIN_BUDGET_PERCENT = 5
MIN_PIN_BUDGET = 200
# The rollout `event_msg` types that add and remove a pin (the rollout is the truth; see fold_pins).
PIN_ADDED = "pin_added"
PIN_REMOVED = "pin_removed"
PIN_EVENTS = (PIN_ADDED, PIN_REMOVED)


class PinKind(StrEnum):
    CONSTRAINT = "constraint"
    DECISION = "decision"
    FILE = "file"
    FACT = "fact"



@dataclass(frozen=True)
class Pin:
    pin_id: str
    kind: PinKind
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PinKind(self.kind))
        text = " ".join(str(self.text).split())
        if not text:
            raise ValueError("a pin needs some text")
        if len(text) > MAX_PIN_CHARS:
            raise ValueError(f"a pin holds at most {MAX_PIN_CHARS} characters")
        object.__setattr__(self, "text", text)

    def fact(self) -> ProbeFact:
        return ProbeFact.of(FactKind.PIN, self.text,
                            "Which pinned constraints, decisions and files must you keep in mind?")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.pin_id, "kind": self.kind.value, "text": self.text}


class PinBudgetExceeded(ValueError):
    """Pinning would put the pins' block over its token budget; carries the figures the refusal shows."""

    def __init__(self, *, used: int, after: int, budget: int, source: str) -> None:
        self.used, self.after, self.budget, self.source = used, after, budget, source
        super().__init__(
            f"the pins would take {after:,} tokens, over their budget of {budget:,} tokens ({source}); "
            f"{used:,} tokens are pinned already and this pin adds {after - used:,}: unpin something or raise the "
            "policy's pin budget")


def pin_budget(*, usable_window: int, configured: int | None) -> tuple[int, str]:
    """The pins' total token budget and where it comes from (the policy's value, or the default share)."""
    if configured is not None:
        return configured, "the policy's pin budget"
    budget = max(MIN_PIN_BUDGET, usable_window * DEFAULT_PIN_BUDGET_PERCENT // 100)
    return budget, f"{DEFAULT_PIN_BUDGET_PERCENT}% of the {usable_window}-token usable window"


def check_budget(pins: list[Pin], new: Pin, *, count, budget: int, source: str) -> int:
    """The pins' block's tokens with `new` added; raises PinBudgetExceeded past the budget. `count` counts one
    item's tokens (the session's counter)."""
    used = count(pinned_block(pins)) if pins else 0
    after = count(pinned_block([*pins, new]))
    if after > budget:
        raise PinBudgetExceeded(used=used, after=after, budget=budget, source=source)
    return after


def is_pinned_block(item: Item) -> bool:
    return is_message(item, "developer") and message_text(item).lstrip().startswith(PINNED_OPEN)


def pinned_block(pins: list[Pin]) -> Item:
    """The developer message holding every pin in force; it replaces any earlier pinned block (an empty list says
    that no pin is in force any more, so an unpinned text stops binding the model at the next request)."""
    if pins:
        lines = [PINNED_OPEN, "Pinned by the operator; keep these in mind for the rest of the task (this list "
                 "replaces any earlier pinned context):"]
        lines += [f"- ({p.kind.value}) {p.text}" for p in pins]
    else:
        lines = [PINNED_OPEN, "No pinned context is in force any more: disregard any earlier pinned context."]
    lines.append(PINNED_CLOSE)
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "\n".join(lines)}]}


def apply_pins(history: list[Item], pins: list[Pin], mode: PinMode = PinMode.REINJECT) -> list[Item]:
    """The replacement history with every older pinned block taken out and the pins in force re-injected after it
    (reinject), or unchanged (check_only). Whatever a strategy kept (masking keeps every message), an unpinned text
    does not survive the compaction."""
    if PinMode(mode) is PinMode.CHECK_ONLY:
        return list(history)
    kept = [i for i in history if not is_pinned_block(i)]
    return [*kept, pinned_block(pins)] if pins else kept


def fold_pins(events: list[dict[str, Any]]) -> list[Pin]:
    """The pins in force after a sequence of rollout `pin_added` / `pin_removed` event payloads, oldest first."""
    pins: dict[str, Pin] = {}
    for event in events:
        if event.get("type") == PIN_ADDED:
            pin = event.get("pin") or {}
            pins[str(pin.get("id"))] = Pin(pin_id=str(pin.get("id")), kind=pin.get("kind", "fact"),
                                           text=pin.get("text", ""))
        elif event.get("type") == PIN_REMOVED:
            pins.pop(str(event.get("pin_id")), None)
    return list(pins.values())
