"""Scoring what a new window retains of the probe facts (the structural check, and the shape both checks share).

The structural check needs no model: a fact is *kept* when one of its evidence alternatives has all its needles in
one segment of the post-compaction history (a message line, or a tool call read together with its output), compared
in normalised form. Encrypted compaction items are opaque to it: only the model can say what they remember, which
is what the model-judged check (`probes.py`) asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from compaction_app.engine.items import (
    TOOL_CALL_KINDS,
    TOOL_OUTPUT_KINDS,
    Item,
    is_message,
    is_summary_message,
    message_text,
)
from compaction_app.engine.retention.facts import (
    Category,
    ProbeFact,
    arguments,
    command_of,
    extract_facts,
    left_items,
    normalise,
    output_text,
)


class CheckMethod(StrEnum):
    STRUCTURAL = "structural"
    MODEL_JUDGED = "model_judged"


@dataclass(frozen=True)
class Verdict:
    fact: ProbeFact
    kept: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.fact.to_dict(), "kept": self.kept}


@dataclass(frozen=True)
class RetentionScore:
    """The verdicts of one check. `score` is kept / total (None when nothing left the window)."""

    method: CheckMethod
    verdicts: tuple[Verdict, ...]
    tokens_spent: int = 0
    answers: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.verdicts)

    @property
    def kept(self) -> int:
        return sum(1 for v in self.verdicts if v.kept)

    @property
    def score(self) -> float | None:
        return round(self.kept / self.total, 4) if self.total else None

    @property
    def forgotten(self) -> list[ProbeFact]:
        return [v.fact for v in self.verdicts if not v.kept]

    def by_category(self) -> dict[str, dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for category in Category:
            verdicts = [v for v in self.verdicts if v.fact.category is category]
            kept = sum(1 for v in verdicts if v.kept)
            rows[category.value] = {
                "kept": kept, "total": len(verdicts),
                "score": round(kept / len(verdicts), 4) if verdicts else None,
            }
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method.value, "score": self.score, "kept": self.kept, "total": self.total,
            "categories": self.by_category(), "facts": [v.to_dict() for v in self.verdicts],
            "tokens_spent": self.tokens_spent,
        }


def segments(items: list[Item]) -> list[str]:
    """The normalised texts a fact may be found in: each message line (a summary line is one claim), each tool call
    together with its output, reasoning summaries. Compaction items carry no visible text."""
    outputs = {i.get("call_id"): i for i in items if i.get("type") in TOOL_OUTPUT_KINDS}
    paired: set[str] = set()
    found: list[str] = []
    for item in items:
        kind = item.get("type")
        if is_message(item):
            text = message_text(item)
            if not is_summary_message(item):  # a summary is many claims: each of its lines stands alone
                found.append(normalise(text))
            found += [normalise(line) for line in text.splitlines() if line.strip()]
        elif kind in TOOL_CALL_KINDS:
            output = outputs.get(item.get("call_id"))
            if output is not None:
                paired.add(str(item.get("call_id")))
            parts = [str(item.get("name", "")), command_of(item) or "", str(arguments(item) or item.get("arguments"))]
            # Only the head of an output holds the status line: keeping a whole 20k-token log is not needed.
            parts.append(output_text(output)[:2000] if output is not None else "")
            found.append(normalise(" ".join(parts)))
        elif kind in TOOL_OUTPUT_KINDS and str(item.get("call_id")) not in paired:
            found.append(normalise(output_text(item)[:2000]))
        elif kind == "reasoning":
            summary = " ".join(p.get("text", "") for p in item.get("summary") or [] if isinstance(p, dict))
            if summary:
                found.append(normalise(summary))
    return found


def is_present(fact: ProbeFact, texts: list[str]) -> bool:
    return any(all(n in text for n in alternative) for alternative in fact.evidence for text in texts)


def structural_check(facts: list[ProbeFact], after: list[Item]) -> RetentionScore:
    texts = segments(after)
    return RetentionScore(
        method=CheckMethod.STRUCTURAL,
        verdicts=tuple(Verdict(fact=f, kept=is_present(f, texts)) for f in facts),
    )


def judge_answers(facts: list[ProbeFact], answers: dict[str, str], *, tokens_spent: int) -> RetentionScore:
    """The model-judged verdicts: a fact is kept when the answer to its category's probe states it (the same
    evidence rule as the structural check, applied to the answer's lines)."""
    verdicts = []
    for fact in facts:
        answer = answers.get(fact.category.value, "")
        texts = [normalise(answer), *(normalise(line) for line in answer.splitlines() if line.strip())]
        verdicts.append(Verdict(fact=fact, kept=is_present(fact, texts)))
    return RetentionScore(method=CheckMethod.MODEL_JUDGED, verdicts=tuple(verdicts), tokens_spent=tokens_spent,
                          answers=dict(answers))


def facts_that_left(before: list[Item], after: list[Item], pins: list[ProbeFact] | None = None) -> list[ProbeFact]:
    """The facts to probe for one compaction: those of the items that left the window, plus every pin (a pin is
    checked whether or not its item left)."""
    gone = left_items(before, after)
    # An output that left while its call stayed (masking) is read with its call, so "exit 1 of pytest -q" is probed.
    gone_ids = {i.get("call_id") for i in gone if i.get("type") in TOOL_OUTPUT_KINDS}
    calls = {i.get("call_id"): i for i in before if i.get("type") in TOOL_CALL_KINDS and i.get("call_id") in gone_ids}
    with_calls = [c for c in calls.values() if c not in gone] + gone
    facts = extract_facts(with_calls)
    keys = {f.key for f in facts}
    return [*facts, *(p for p in pins or [] if p.key not in keys)]


def score_compaction(before: list[Item], after: list[Item], pins: list[ProbeFact] | None = None) -> RetentionScore:
    """The structural retention score of one compaction."""
    return structural_check(facts_that_left(before, after, pins), after)
