"""Probe facts: what a compaction could forget, derived deterministically from the items that left the window.

Categories follow Factory's probe study ("Evaluating context compression for AI agents"): *recall* (the user's
goals and constraints), *artifact trail* (files read and changed, commands with their exit status, errors seen),
*continuation* (the next step: the pending request, stated next steps) and *decision* (what the agent concluded or
chose). Each fact carries the strings that prove it survived (`evidence`: alternatives, each a tuple of needles
that must all appear in one segment of the new window) and a probe question for the model-judged check.

Nothing here calls a model or touches Django; the same history always gives the same facts.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from compaction_app.engine.items import (
    TOOL_CALL_KINDS,
    TOOL_OUTPUT_KINDS,
    Item,
    is_message,
    is_real_user_message,
    message_text,
)


class Category(StrEnum):
    """The four probe categories (Factory's probe types), in display order."""

    RECALL = "recall"
    ARTIFACT_TRAIL = "artifact_trail"
    CONTINUATION = "continuation"
    DECISION = "decision"


class FactKind(StrEnum):
    GOAL = "goal"
    CONSTRAINT = "constraint"
    FILE_READ = "file_read"
    FILE_CHANGED = "file_changed"
    COMMAND = "command"
    ERROR = "error"
    NEXT_STEP = "next_step"
    DECISION = "decision"
    PIN = "pin"


CATEGORY_OF = {
    FactKind.GOAL: Category.RECALL,
    FactKind.CONSTRAINT: Category.RECALL,
    FactKind.PIN: Category.RECALL,
    FactKind.FILE_READ: Category.ARTIFACT_TRAIL,
    FactKind.FILE_CHANGED: Category.ARTIFACT_TRAIL,
    FactKind.COMMAND: Category.ARTIFACT_TRAIL,
    FactKind.ERROR: Category.ARTIFACT_TRAIL,
    FactKind.NEXT_STEP: Category.CONTINUATION,
    FactKind.DECISION: Category.DECISION,
}

SHELL_TOOLS = frozenset({"shell", "exec_command", "container.exec", "bash", "run", "terminal"})
READ_TOOLS = frozenset({"read_file", "view", "open_file", "cat"})
PATCH_TOOLS = frozenset({"apply_patch", "edit_file", "write_file"})
PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (\S+)", re.MULTILINE)
EXIT_CODE = re.compile(r"^Exit code: (-?\d+)", re.MULTILINE)
ERROR_LINE = re.compile(r"Traceback|FAILED|\w*Error\b|\bERROR\b|\berror:|Exception\b|panicked")
CONSTRAINT = re.compile(r"\b(?:must(?: not)?|never|always|do not|don't|only|without)\b", re.IGNORECASE)
NEXT_STEP = re.compile(r"^\s*(?:next(?: step)?s?\s*[:\-]|todo\s*[:\-]|- \[ \])\s*(.+)$", re.IGNORECASE)
DECISION = re.compile(
    r"\b(?:decided|decide to|chose|choose|we will|i will|i'll|going with|instead of|because|the fix is|"
    r"root cause|done with)\b",
    re.IGNORECASE,
)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
# How much of a long text proves it survived: its opening words, normalised (summaries clip long lines).
NEEDLE_CHARS = 80
MAX_ERRORS_PER_OUTPUT = 1


def normalise(text: str) -> str:
    """Lower case, markdown quoting removed, whitespace collapsed: the form facts are compared in."""
    return " ".join(text.replace("`", " ").replace("*", " ").replace('"', " ").lower().split())


def needle(text: str, limit: int = NEEDLE_CHARS) -> str:
    """The opening of a normalised text, cut at a word boundary."""
    norm = normalise(text)
    if len(norm) <= limit:
        return norm
    cut = norm[:limit]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut


@dataclass(frozen=True)
class ProbeFact:
    """One fact that left the window. `evidence` is a tuple of alternatives; an alternative is kept when all its
    needles occur in one segment of the new window (an item, or a tool call together with its output)."""

    kind: FactKind
    text: str
    evidence: tuple[tuple[str, ...], ...]
    question: str

    @property
    def category(self) -> Category:
        return CATEGORY_OF[self.kind]

    @property
    def key(self) -> str:
        return f"{self.kind.value}:{normalise(self.text)}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "category": self.category.value, "text": self.text}


def item_key(item: Item) -> str:
    """An identity for an item that survives re-serialisation: role and text for messages, type and call id for
    tool traffic, the canonical JSON otherwise."""
    if is_message(item):
        return f"message:{item.get('role')}:{message_text(item)}"
    kind = item.get("type")
    if kind in TOOL_CALL_KINDS or kind in TOOL_OUTPUT_KINDS:
        payload = item.get("arguments") if kind in TOOL_CALL_KINDS else item.get("output")
        return f"{kind}:{item.get('call_id')}:{json.dumps(payload, sort_keys=True, default=str)}"
    return json.dumps(item, sort_keys=True, default=str)


def left_items(before: list[Item], after: list[Item]) -> list[Item]:
    """Items of `before` that are not in `after` (a multiset difference by `item_key`), in order."""
    remaining = Counter(item_key(i) for i in after)
    gone = []
    for item in before:
        key = item_key(item)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            gone.append(item)
    return gone


def arguments(item: Item) -> dict[str, Any]:
    raw = item.get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def command_of(item: Item) -> str | None:
    """The command line of a shell call (`["bash", "-lc", script]` unwrapped), else None."""
    if item.get("type") == "local_shell_call":
        command = (item.get("action") or {}).get("command")
    elif item.get("type") == "function_call" and item.get("name") in SHELL_TOOLS:
        args = arguments(item)
        command = args.get("command", args.get("cmd"))
    else:
        return None
    if isinstance(command, list):
        command = command[-1] if len(command) == 3 and command[1] in ("-lc", "-c") else " ".join(map(str, command))
    return " ".join(str(command).split()) if command else None


def output_text(item: Item) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(p.get("text", "") for p in output if isinstance(p, dict))
    return json.dumps(output) if output is not None else ""


def read_path(item: Item) -> str | None:
    if item.get("type") == "function_call" and item.get("name") in READ_TOOLS:
        path = arguments(item).get("path")
        return str(path) if path else None
    return None


def changed_paths(item: Item) -> list[str]:
    if item.get("type") == "function_call" and item.get("name") in PATCH_TOOLS:
        args = arguments(item)
        body = args.get("input") or args.get("patch") or ""
        paths = PATCH_FILE.findall(str(body))
        if not paths and args.get("path"):
            paths = [str(args["path"])]
        return paths
    return []


def exit_code(output: str) -> int | None:
    match = EXIT_CODE.search(output)
    return int(match.group(1)) if match else None


def exit_evidence(command: str, code: int) -> tuple[tuple[str, ...], ...]:
    """A command's exit status survives when the command and its status appear together: the call and its output
    still in the window, or a summary line such as "`pytest -q` exited 1" / "pytest -q (exit code 1)"."""
    cmd = needle(command)
    return ((cmd, f"exit code: {code}"), (cmd, f"exit code {code}"), (cmd, f"exit {code}"), (cmd, f"exited {code}"),
            (cmd, f"exited with {code}"))


class _Collector:
    def __init__(self) -> None:
        self.facts: dict[str, ProbeFact] = {}

    def add(self, kind: FactKind, text: str, question: str,
            evidence: tuple[tuple[str, ...], ...] | None = None) -> None:
        text = " ".join(text.split())
        if not text:
            return
        fact = ProbeFact(kind=kind, text=text, evidence=evidence or ((needle(text),),), question=question)
        self.facts.setdefault(fact.key, fact)


def extract_facts(items: list[Item]) -> list[ProbeFact]:
    """The probe facts of `items` (normally what left the window), deduplicated, in order of appearance."""
    c = _Collector()
    outputs = {i.get("call_id"): i for i in items if i.get("type") in TOOL_OUTPUT_KINDS}
    last_goal: str | None = None
    for item in items:
        kind = item.get("type")
        if is_real_user_message(item):
            text = message_text(item).strip()
            if not text:
                continue
            last_goal = text
            c.add(FactKind.GOAL, text, "What did the user ask for?")
            for sentence in SENTENCE.split(text):
                if CONSTRAINT.search(sentence) and normalise(sentence) != normalise(text):
                    c.add(FactKind.CONSTRAINT, sentence, "Which constraints did the user set?")
        elif is_message(item, "assistant"):
            text = message_text(item)
            for line in text.splitlines():
                match = NEXT_STEP.match(line)
                if match:
                    c.add(FactKind.NEXT_STEP, match.group(1), "What is the next step?")
                elif DECISION.search(line) and not line.lstrip().startswith("- "):
                    c.add(FactKind.DECISION, line.strip(), "What did the agent decide or conclude?")
        elif kind in TOOL_CALL_KINDS:
            path = read_path(item)
            if path:
                c.add(FactKind.FILE_READ, path, "Which files were read?")
            for changed in changed_paths(item):
                c.add(FactKind.FILE_CHANGED, changed, "Which files were changed?")
            command = command_of(item)
            output = outputs.get(item.get("call_id"))
            if command:
                code = exit_code(output_text(output)) if output is not None else None
                if code is None:
                    c.add(FactKind.COMMAND, command, "Which commands were run?")
                else:
                    c.add(FactKind.COMMAND, f"exit {code} of {command}", "Which commands were run, and how did "
                          "they exit?", evidence=exit_evidence(command, code))
            if output is not None:
                errors = [line.strip() for line in output_text(output).splitlines() if ERROR_LINE.search(line)]
                for line in errors[:MAX_ERRORS_PER_OUTPUT]:
                    c.add(FactKind.ERROR, line, "Which errors were seen?")
    if last_goal is not None:
        c.add(FactKind.NEXT_STEP, f"continue: {needle(last_goal)}", "What is the next step?",
              evidence=((needle(last_goal),),))
    return list(c.facts.values())
