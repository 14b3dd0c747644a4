"""Scoring what a new window retains of the probe facts (the structural check, and the shape both checks share).

The structural check needs no model: a fact is *kept* when one segment of the post-compaction history states it
(`match.states`: every anchor, enough content words, the exit status), a segment being a message, a message line,
two adjacent summary lines, a tool call read together with its output, or a reasoning summary. The score weighs each
fact by its kind (`facts.WEIGHTS`).

Two more rules make the score track what the model can still use:
- **cumulative**: a compaction is scored on the facts that left at it *plus* every fact an earlier compaction of
  the session judged (`carried`, held or lost), so a second compaction is judged on everything the session has
  seen leave: a fact lost at the first stays lost in every later score until a window states it again;
- **opaque**: a window holding an encrypted compaction item (remote compaction) may remember what is not visible.
  Facts not visibly stated are then *not scored* rather than lost: the score is None with `opaque` set, and what is
  visible is reported separately (`visible_kept`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from compaction_app.engine.items import (
    TOOL_CALL_KINDS,
    TOOL_OUTPUT_KINDS,
    Item,
    is_compaction_item,
    is_message,
    is_summary_message,
    message_text,
)
from compaction_app.engine.retention.claims import flat_claims
from compaction_app.engine.retention.contradictions import claims_done, drops_negation, turns_choice_round
from compaction_app.engine.retention.counts import run_counts, states_counts
from compaction_app.engine.retention.facts import (
    HTTP_FAILURE,
    Category,
    FactKind,
    ProbeFact,
    call_text,
    current_values,
    extract_facts,
    history_statements,
    left_items,
    output_text,
)
from compaction_app.engine.retention.match import (
    WEEKDAYS,
    Segment,
    about_another,
    holds_value,
    mislabelled,
    names_setting,
    stated_values,
    states,
    states_row,
    states_setting,
    states_value,
)
from compaction_app.engine.retention.tallies import is_tally_setting, states_tally

# The cumulative score carries at most this many facts from one compaction to the next (newest kept).
MAX_CARRIED = 400
# How much of a tool output a segment reads: the status header and the lines a summary would quote.
OUTPUT_CHARS = 8000
# Where a sentence of prose ends: ". " before a capital letter or a digit (not "app.toml", not "e.g. x").
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9`|(-])")


class CheckMethod(StrEnum):
    STRUCTURAL = "structural"
    MODEL_JUDGED = "model_judged"


@dataclass(frozen=True)
class Verdict:
    fact: ProbeFact
    kept: bool
    # A model-judged verdict: the answer line it was judged on, and the structural check's verdict on the same fact
    # (`RetentionScore.compared_with`), so a disagreement is shown as one.
    answer: str | None = None
    structural_kept: bool | None = None

    @property
    def disagrees(self) -> bool:
        return self.structural_kept is not None and self.structural_kept != self.kept

    def to_dict(self) -> dict[str, Any]:
        data = {**self.fact.to_dict(), "kept": self.kept}
        if self.answer is not None:
            data["answer"] = self.answer
        if self.structural_kept is not None:
            data |= {"structural_kept": self.structural_kept, "disagrees": self.disagrees}
        return data


def _weighted(verdicts: list[Verdict] | tuple[Verdict, ...]) -> float | None:
    total = sum(v.fact.weight for v in verdicts)
    return round(sum(v.fact.weight for v in verdicts if v.kept) / total, 4) if total else None


@dataclass(frozen=True)
class RetentionScore:
    """The verdicts of one check. `score` is the weighted share of facts kept (None when nothing left the window,
    or when the window is opaque: then `visible_score` is the share visibly kept)."""

    method: CheckMethod
    verdicts: tuple[Verdict, ...]
    tokens_spent: int = 0
    answers: dict[str, str] = field(default_factory=dict)
    opaque: bool = False

    @property
    def total(self) -> int:
        return len(self.verdicts)

    @property
    def kept(self) -> int:
        return sum(1 for v in self.verdicts if v.kept)

    @property
    def visible_score(self) -> float | None:
        return _weighted(self.verdicts)

    @property
    def score(self) -> float | None:
        return None if self.opaque else self.visible_score

    @property
    def forgotten(self) -> list[ProbeFact]:
        return [v.fact for v in self.verdicts if not v.kept]

    @property
    def held(self) -> list[ProbeFact]:
        return [v.fact for v in self.verdicts if v.kept]

    @property
    def disagreements(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.disagrees]

    def compared_with(self, structural: RetentionScore | None) -> RetentionScore:
        """This (model-judged) score with each verdict beside the structural check's on the same fact."""
        if structural is None:
            return self
        theirs = {v.fact.key: v.kept for v in structural.verdicts}
        verdicts = tuple(replace(v, structural_kept=theirs.get(v.fact.key)) for v in self.verdicts)
        return replace(self, verdicts=verdicts)

    def by_category(self) -> dict[str, dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for category in Category:
            verdicts = [v for v in self.verdicts if v.fact.category is category]
            kept = sum(1 for v in verdicts if v.kept)
            rows[category.value] = {"kept": kept, "total": len(verdicts),
                                    "score": None if self.opaque else _weighted(verdicts)}
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method.value, "score": self.score, "kept": self.kept, "total": self.total,
            "categories": self.by_category(), "facts": [v.to_dict() for v in self.verdicts],
            "tokens_spent": self.tokens_spent, "opaque": self.opaque, "visible_score": self.visible_score,
            "weighted": True, "disagreements": len(self.disagreements),
        }


def _summary_segments(text: str) -> list[Segment]:
    """A summary is many claims: each line stands alone, and so do two adjacent lines (a claim wrapped in two), and
    each sentence of a line of prose (a setting's value is read in the sentence that names it)."""
    lines = [line for line in text.splitlines() if line.strip()]
    found = []
    whole = []
    for line in lines:
        sentences = [s for s in SENTENCE_END.split(line) if s.strip()]
        whole.append(Segment(line, multi=len(sentences) > 1))
        found.append(whole[-1])
        if len(sentences) > 1:
            found += [Segment(sentence) for sentence in sentences]
    for (a, first), (b, second) in zip(zip(lines, whole, strict=True), zip(lines[1:], whole[1:], strict=True),
                                       strict=False):
        joined = Segment(f"{a}\n{b}", joined=True)
        joined.halves = tuple(half for half in (first, second) if not half.multi)
        found.append(joined)
    # A JSON object, a table row or a YAML item is also one "subject: value" claim (`claims.py`).
    found += [Segment(claim) for claim in flat_claims(lines)]
    return found


def segments(items: list[Item]) -> list[Segment]:
    """The texts a fact may be found in: each message and each of its lines, each tool call with its output,
    reasoning summaries. Encrypted compaction items carry no visible text."""
    outputs = {i.get("call_id"): i for i in items if i.get("type") in TOOL_OUTPUT_KINDS}
    paired: set[str] = set()
    found: list[Segment] = []
    for item in items:
        kind = item.get("type")
        if is_message(item):
            text = message_text(item)
            if not is_summary_message(item):
                found.append(Segment(text, multi=True))
            found += _summary_segments(text)
        elif kind in TOOL_CALL_KINDS:
            output = outputs.get(item.get("call_id"))
            if output is not None:
                paired.add(str(item.get("call_id")))
            body = output_text(output)[:OUTPUT_CHARS] if output is not None else ""
            found.append(Segment(f"{call_text(item)}\n{body}", tool=True))
        elif kind in TOOL_OUTPUT_KINDS and str(item.get("call_id")) not in paired:
            found.append(Segment(output_text(item)[:OUTPUT_CHARS]))
        elif kind == "reasoning":
            summary = " ".join(p.get("text", "") for p in item.get("summary") or [] if isinstance(p, dict))
            if summary:
                found.append(Segment(summary))
    return found


def fact_in(fact: ProbeFact, found: list[Segment]) -> bool:
    if fact.setting and is_tally_setting(fact.setting):  # a line of counts, stated in its order (`tallies.py`)
        return any(states_tally(segment.text, fact.value) and names_setting(segment, setting=fact.setting,
                                                                            source=fact.subject)
                   for segment in found if not segment.joined and not segment.multi)
    if fact.setting:
        # A row's name and values may sit on two adjacent lines (a YAML item's topic and value).
        return any(states_setting(segment, setting=fact.setting, value=fact.value, source=fact.subject)
                   and not mislabelled(fact.text, fact.value, segment)
                   for segment in found if not segment.joined and not segment.multi) or \
            bool(fact.row) and any(_states_row(fact, segment) for segment in found if not segment.multi)
    # A failure line's plain numbers are loose (a pid, a line number), but not a failed request's status.
    loose = fact.kind is FactKind.ERROR and HTTP_FAILURE.search(fact.text) is None
    counts = run_counts(fact.text) if loose else None
    if counts is not None:  # a test run's counts, in any order or as "3 of 15 fail" (`counts.py`)
        return any(states_counts(segment.text, counts) for segment in found if not segment.joined)
    anchors, words, values, days = fact.anchors, fact.words, (), ()
    if fact.kind in _SAID:
        # Weekdays a user named are values of the fact ("Monday to Wednesday"), each to be stated, in full or short.
        days = tuple(w for w in words if w in WEEKDAYS)
        values, covered = stated_values(fact.text)
        if values:  # its dates and quantities are compared by what they are, not as the tokens they were written in
            anchors = tuple(a for a in anchors if a not in covered)
            words = tuple(w for w in words if w not in covered)
    return any(
        states(segment if not fact.subject else _without(segment, fact.subject), anchors=anchors,
               words=words, status=fact.status, loose_numbers=loose, values=len(values))
        and all(holds_value(segment, value) for value in values) and all(d in segment.words for d in days)
        and not contradicts(fact, _claim(fact, segment))
        # A command and its exit status are one claim: read within one line or sentence, not across two.
        for segment in found if not ((segment.joined or segment.multi) and fact.status is not None)
    )


def _states_row(fact: ProbeFact, segment: Segment) -> bool:
    """A table row stated by one line, or named on one line and stated by the next (a YAML item's topic and
    value): the values are counted on one line only."""
    if not segment.joined:
        return states_row(segment, fact.row, fact.row_name, fact.subject)
    return any(states_row(segment, fact.row, fact.row_name, fact.subject, half) for half in segment.halves)


# Facts said in words (by the user, the agent or a pin), whose dates and quantities a summary may restate in another
# format or unit ("2 GB" as "2000 MB", "Jul 15, 2027" as "2027-07-15"). Facts read from tool outputs have settings
# for that, and a failure line's numbers are loose.
_SAID = frozenset({FactKind.GOAL, FactKind.CONSTRAINT, FactKind.DECISION, FactKind.NEXT_STEP, FactKind.PIN})


# Facts whose words a claim can keep while saying the opposite (`contradictions.py`).
_CHOICES = frozenset({FactKind.GOAL, FactKind.CONSTRAINT, FactKind.DECISION, FactKind.NEXT_STEP})


_SENTENCES = re.compile(r"(?<=[.!?;])\s+")


def _claim(fact: ProbeFact, segment: Segment) -> str:
    """What a segment claims of a fact: in a text of several lines or sentences, those that name it (another
    line's "still open" or a heading says nothing of this step)."""
    if not fact.anchors:
        return segment.text
    sentences = [s for line in segment.lines for s in _SENTENCES.split(line)]
    # The sentences about the fact's first identifier, its subject ("migrations go to prod-20 now", not the next
    # clause's "staging-20 is frozen"), else those naming any of them.
    naming = [s for s in sentences if fact.anchors[0] in s] or \
        [s for s in sentences if any(a in s for a in fact.anchors)]
    return " ".join(naming) or segment.text


def contradicts(fact: ProbeFact, claim: str) -> bool:
    """Whether a claim that holds a fact's anchors and words says the opposite of it: its choice turned round, a
    prohibition without its negative, a step still to do reported done."""
    if fact.kind not in _CHOICES:
        return False
    if turns_choice_round(fact.text, claim):
        return True
    if fact.kind is FactKind.CONSTRAINT and drops_negation(fact.text, claim):
        return True
    return fact.kind is FactKind.NEXT_STEP and claims_done(fact.text, claim)


def _without(segment: Segment, subject: str) -> Segment:
    """The segment with a command's own text taken out before its status is read (`grep error` states no error)."""
    if subject not in segment.text:
        return segment
    stripped = Segment("", joined=segment.joined)
    stripped.tokens, stripped.words = segment.tokens, segment.words
    stripped.text = segment.text.replace(subject, " ")
    return stripped


def is_opaque(items: list[Item]) -> bool:
    """Whether the window holds an encrypted compaction item whose content the structural check cannot read."""
    return any(is_compaction_item(i) and i.get("encrypted_content") for i in items)


def structural_check(facts: list[ProbeFact], after: list[Item]) -> RetentionScore:
    found = segments(after)
    return RetentionScore(
        method=CheckMethod.STRUCTURAL,
        verdicts=tuple(Verdict(fact=f, kept=fact_in(f, found)) for f in facts),
        opaque=is_opaque(after),
    )


# An answer that says it does not know is no evidence, whatever else the line holds ("I do not know how either
# command exited; the tests looked ok").
HEDGE = re.compile(
    r"\b(?:i do not know|i don't know|do not know|don't know|not sure|unsure|unknown|no idea|can(?:no|')t tell|"
    r"cannot tell|not certain|do not remember|don't remember|no record|not recorded|not visible|not stated|"
    r"not mentioned|n/a)\b", re.IGNORECASE)


def hedged(line: str) -> bool:
    return HEDGE.search(line.replace("’", "'")) is not None


def strict_status(code: int) -> re.Pattern[str]:
    """An exit status an answer asserts: the number next to exit/code/status words, or for 0 passed/succeeded, for
    others failed/crashed. Not "ok", "green", "clean" or "looked fine": those confirm no exit status."""
    number = r"(?:exit(?:ed)?(?:[ _](?:with|code|status))*[: =]*|code[: =]+|status[: =]+|returned |rc[ =:]+)"
    words = r"passed|succeeded|successfully" if code == 0 else r"failed|failing|crashed|errored"
    return re.compile(rf"{number}\(?{code}\b|\b(?:{words})\b")


def _answers_fact(fact: ProbeFact, line: str) -> bool:
    """Whether the answer line to a fact's own question states it (the question named the subject)."""
    segment = Segment(line)
    if fact.setting:  # the question named the setting; the line must not be about a sibling of its source
        return states_value(segment, fact.value) and not about_another(segment, fact.subject)
    if fact.status is not None:
        return bool(strict_status(fact.status).search(segment.text))
    return fact_in(fact, [segment])


def judge_answers(facts: list[ProbeFact], answers: dict[str, str], *, tokens_spent: int,
                  numbered: dict[str, int] | None = None) -> RetentionScore:
    """The model-judged verdicts, each fact against the answer about it: a fact with a question of its own
    (`numbered`: fact key -> question number; a command's exit status, a setting's value) against the answer line of
    that number alone; any other fact against the lines of its category's answer that do not say they do not
    know, by the structural check's evidence rule. A missing or hedged answer keeps nothing."""
    numbered = numbered or {}
    verdicts = []
    for fact in facts:
        answer = answers.get(fact.category.value, "")
        number = numbered.get(fact.key)
        if number is not None:
            line = numbered_answer(answer, number)
            kept = line is not None and not hedged(line) and _answers_fact(fact, line)
            verdicts.append(Verdict(fact=fact, kept=kept, answer=line or ""))
            continue
        lines = "\n".join(line for line in answer.splitlines() if line.strip() and not hedged(line)
                          and not ANSWER_LINE.match(line))
        kept = bool(lines) and fact_in(fact, [Segment(lines), *_summary_segments(lines)])
        verdicts.append(Verdict(fact=fact, kept=kept))
    return RetentionScore(method=CheckMethod.MODEL_JUDGED, verdicts=tuple(verdicts), tokens_spent=tokens_spent,
                          answers=dict(answers))


# The answer to question N of a probe: "A3. ..." (or "3. ..." when the answer numbers no line with "A").
ANSWER_LINE = re.compile(r"^\s*A(\d+)[.):]\s*(.*)$", re.IGNORECASE)


def numbered_answer(answer: str, number: int) -> str | None:
    lines = answer.splitlines()
    for line in lines:
        match = ANSWER_LINE.match(line)
        if match and int(match.group(1)) == number:
            return match.group(2).strip()
    if not any(ANSWER_LINE.match(line) for line in lines):
        for line in lines:
            match = re.match(rf"^\s*{number}[.)]\s+(.*)$", line)
            if match:
                return match.group(1).strip()
    return None


def facts_that_left(before: list[Item], after: list[Item], pins: list[ProbeFact] | None = None,
                    carried: list[ProbeFact] | None = None) -> list[ProbeFact]:
    """The facts to probe for one compaction: those of the items that left the window, every pin (checked whether
    or not its item left), and the facts an earlier compaction still held (`carried`: the score is cumulative)."""
    gone = left_items(before, after)
    # An output that left while its call stayed (masking) is read with its call, so "exit 1 of pytest -q" is probed.
    gone_ids = {i.get("call_id") for i in gone if i.get("type") in TOOL_OUTPUT_KINDS}
    gone_set = {id(i) for i in gone}
    calls = [i for i in before
             if i.get("type") in TOOL_CALL_KINDS and i.get("call_id") in gone_ids and id(i) not in gone_set]
    statements = history_statements(before)
    facts = extract_facts([*calls, *gone], context=before, statements=statements)
    keys = {f.key for f in facts}
    out = list(facts)
    for extra in [*current_values((carried or [])[-MAX_CARRIED:], statements), *(pins or [])]:
        if extra.key not in keys:
            keys.add(extra.key)
            out.append(extra)
    return out


def score_compaction(before: list[Item], after: list[Item], pins: list[ProbeFact] | None = None,
                     carried: list[ProbeFact] | None = None) -> RetentionScore:
    """The structural retention score of one compaction."""
    return structural_check(facts_that_left(before, after, pins, carried), after)


def carried_facts(retention: dict[str, Any] | None) -> list[ProbeFact]:
    """The facts a stored score judged, held or lost (the next compaction of the session is scored on them too: a
    fact lost at any compaction stays lost until a window states it again). Pins are not carried: the pins in force
    are added on each compaction."""
    if not retention or retention.get("opaque"):
        return []
    judged = [f for f in retention.get("facts") or [] if f.get("kind") != "pin"]
    return [ProbeFact.from_dict(f) for f in judged][-MAX_CARRIED:]
