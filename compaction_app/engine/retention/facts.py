"""Probe facts: what a compaction could forget, derived deterministically from the items that left the window.

Categories follow Factory's probe study ("Evaluating context compression for AI agents"): *recall* (the user's
goals and constraints, pins), *artifact trail* (files read and changed, commands with their exit status, errors
seen, plain values the agent went on to use), *continuation* (the pending request, stated next steps) and
*decision* (what the agent concluded or chose). Facts come from every item kind Codex and the simulator write:
function calls (`shell`, `exec_command`, `read_file`, `apply_patch`...), custom tool calls (freeform
`apply_patch`), `local_shell_call`, and their outputs in each exit-status form (`Exit code: N`, Codex 0.169's
`Process exited with code N`, the JSON `metadata.exit_code`). Each fact carries what proves it survived: its
anchors (identifiers and numbers from its whole text), its content words and, for a command, its exit status
(`match.py`); and a weight by kind (a goal or a failing command matters more than one file read).

Nothing here calls a model or touches Django; the same history always gives the same facts.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import Any

from compaction_app.engine.items import (
    TOOL_CALL_KINDS,
    TOOL_OUTPUT_KINDS,
    Item,
    is_message,
    is_real_user_message,
    is_summary_message,
    message_text,
)
from compaction_app.engine.retention.match import anchors_of, is_code, names_of, normalise, words_of
from compaction_app.engine.retention.statements import (
    SPREAD,
    TABLE_CELLS,
    TABLE_HEADER,
    Statement,
    corrected_sources,
    is_table,
    latest_values,
    named_values,
    normalise_key,
    restated,
    structured,
    version_statement,
)
from compaction_app.engine.retention.values import TYPED, VALUE_GROUP_SEPARATOR, typed_values


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
    VALUE = "value"


CATEGORY_OF = {
    FactKind.GOAL: Category.RECALL,
    FactKind.CONSTRAINT: Category.RECALL,
    FactKind.PIN: Category.RECALL,
    FactKind.FILE_READ: Category.ARTIFACT_TRAIL,
    FactKind.FILE_CHANGED: Category.ARTIFACT_TRAIL,
    FactKind.COMMAND: Category.ARTIFACT_TRAIL,
    FactKind.ERROR: Category.ARTIFACT_TRAIL,
    FactKind.VALUE: Category.ARTIFACT_TRAIL,
    FactKind.NEXT_STEP: Category.CONTINUATION,
    FactKind.DECISION: Category.DECISION,
}

# How much a lost fact of each kind weighs in the score: what the user asked and how the work stands count most.
WEIGHTS = {
    FactKind.GOAL: 3, FactKind.CONSTRAINT: 3, FactKind.PIN: 3,
    FactKind.COMMAND: 2, FactKind.ERROR: 2, FactKind.FILE_CHANGED: 2, FactKind.NEXT_STEP: 2, FactKind.DECISION: 2,
    FactKind.FILE_READ: 1, FactKind.VALUE: 1,
}

SHELL_TOOLS = frozenset({"shell", "exec_command", "container.exec", "bash", "run", "terminal", "local_shell",
                         "shell_command", "unified_exec"})
READ_TOOLS = frozenset({"read_file", "view", "open_file", "cat", "view_image"})
PATCH_TOOLS = frozenset({"apply_patch", "edit_file", "write_file", "create_file", "str_replace_editor"})
# Shell programs whose path arguments are files read (`cat src/a.py`, `sed -n 1,80p src/a.py`, `rg x src/a.py`).
READ_PROGRAMS = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat", "sed", "awk", "grep", "rg", "wc",
                           "view", "jq", "diff", "file", "stat", "batcat"})
PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (\S+)", re.MULTILINE)
EXIT_CODE = re.compile(
    r"^(?:Exit code: |Process exited with code )(-?\d+)|\"exit_code\"\s*:\s*(-?\d+)", re.MULTILINE)
# Header lines of a shell output (Codex's exec_command and shell formats, the simulator's): not the output's body.
OUTPUT_HEADER = re.compile(
    r"^(?:Chunk ID: .*|Wall time: .*|Exit code: -?\d+|Process exited with code -?\d+|Original token count: \d+|"
    r"Process running with session ID \d+|Output:|Total output lines: \d+)\s*$")
# Error lines in any wording: not only "Error"/"FAILED" but the failures shells and tools print.
ERROR_LINE = re.compile(
    r"Traceback|FAILED|\w*Error\b|\bERROR\b|\berror\b|Exception\b|panicked|\bfatal\b|\bfailed\b|"
    r"No such file or directory|command not found|[Pp]ermission denied|\bnot found\b|\bcannot\b|\bcan't\b|"
    r"\bunable to\b|\bdenied\b|\brefused\b|\btimed out\b|\bSegmentation fault\b|^E\s{2,}|\bexpected\b.*\bgot\b|"
    r"\bmismatch\b|\binvalid\b|\bundefined\b|\bunresolved\b|\bconflict\b|\bassert\b|"
    # Failures that never say "error": the kernel's and the orchestrator's words, signals, crashes.
    r"\bkilled\b|\bOOM\w*|\bout of memory\b|\bsegfault\w*|\bcore dumped\b|\baborted\b|\bpanic\w*|"
    r"\bSIG(?:KILL|SEGV|ABRT|BUS|TERM)\b|\bCrashLoopBackOff\b|\bEvicted\b|\bBackOff\b|\bdoes not exist\b|"
    r"\bno space left\b|\bdeadlock\b|\bunhealthy\b|\bnon-zero\b|\bexit status [1-9]|\bterminated\b|\bCRITICAL\b|"
    r"\bexited (?:with )?(?:code |status )?\(?[1-9]\d*\b|\btime ?out\b|\bERR!|\berrno\b|"
    r"\bE(?:CONNREFUSED|CONNRESET|NOENT|ACCES|LIFECYCLE|ADDRINUSE|TIMEDOUT|PIPE|PERM)\b|\bconnection reset\b|"
    r"\bHTTP/\d(?:\.\d)?\"? [45]\d\d\b|\bstatus[=:]\s*\"?5\d\d\b|\bService Unavailable\b|\bBad Gateway\b|\bGateway Timeout\b|"
    # A resolver's or a linker's complaint: "... requires x<3.0, but you have x 3.1 which is incompatible".
    r"\bincompatible\b|\bconflicts?\b|\bunsatisfi(?:ed|able)\b",
    re.IGNORECASE)
CONSTRAINT = re.compile(
    r"\b(?:must(?: not)?|never|always|do not|don't|only|without|avoid|"
    # A constraint that says what must stay as it is: "keep the field names as they are", "leave X alone".
    r"keep\b.*\b(?:as (?:it is|they are)|unchanged|intact|stable)|leave\b.*\b(?:alone|as (?:it is|they are)))\b",
    re.IGNORECASE)
# A user's sentence that sets a measure is a constraint whatever its verb ("has to stay below EUR 1,200 a month",
# "should answer within 300 ms"): an amount of money, a percentage, a rate, a number with a unit.
MEASURE = re.compile(
    r"(?:\b(?:EUR|USD|GBP|CHF|JPY)|[€$£¥])\s?\d|\d[\d,.]*\s?(?:%|\b(?:EUR|USD|GBP|CHF|JPY|euros?|dollars?|"
    r"pounds|percent|per\b|a (?:second|minute|hour|day|week|month|year)\b|(?:[kmgt]i?b|ms|seconds?|minutes?|"
    r"hours?|days?|weeks?|months?|req/s|rps)\b))",
    re.IGNORECASE)
NEXT_STEP = re.compile(r"^\s*(?:next(?: step)?s?\s*[:\-]|todo\s*[:\-]|- \[ \])\s*(.+)$", re.IGNORECASE)
DECISION = re.compile(
    r"\b(?:decided|decide to|chose|choose|we will|i will|i'll|going with|instead of|because|the fix is|"
    r"root cause|done with)\b",
    re.IGNORECASE,
)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
# A plain value the agent may go on to use: a number of 3+ digits, an id with letters and digits, a hex digest (a
# git hash up to a sha256 image digest).
VALUE_TOKEN = re.compile(r"(?<![\w./-])(?:\d{3,}|[A-Za-z]+[-_]?\d[\w-]*|[0-9a-f]{7,64})(?![\w/])")
# An output that is one value: a digest, a version, an id with letters and digits, a number of 4+ digits.
SOLE_VALUE = re.compile(r"[0-9a-f]{7,64}|v?\d+\.\d+(?:\.\d+)*[\w.+-]*|[A-Za-z][\w.-]*\d[\w.-]*|\d{4,}")
MAX_ERRORS_PER_OUTPUT = 2
MAX_VALUES_PER_OUTPUT = 3
MAX_FACT_CHARS = 600
# Kept for callers that show a short form of a fact (a pin's label, a probe answer's line).
NEEDLE_CHARS = 80


def needle(text: str, limit: int = NEEDLE_CHARS) -> str:
    """The opening of a normalised text, cut at a word boundary (for display; matching uses `match.py`)."""
    norm = normalise(text)
    if len(norm) <= limit:
        return norm
    cut = norm[:limit]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut


# The question of a value read from a short output (`short_output_values`), which also marks such a fact.
SHORT_OUTPUT_QUESTION = "Which values did the short outputs you asked for state?"


@dataclass(frozen=True)
class ProbeFact:
    """One fact that left the window. It is kept when one segment of the new window holds all its `anchors`,
    enough of its `words` and, for a command, its exit `status` (`match.states`); `subject` is the part of the
    text that states the fact's topic (a command line), not its status."""

    kind: FactKind
    text: str
    question: str
    anchors: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    status: int | None = None
    subject: str = ""
    # A named value (`statements.py`): the setting's name and its latest value; kept when a segment names the
    # setting and states that value (a number with a unit in any unit that agrees).
    setting: str = ""
    value: str = ""
    # A table cell's row (`statements.Statement.row`): a summary stating most of the row keeps the cell too.
    row: tuple[str, ...] = ()
    row_name: str = ""

    @classmethod
    def of(cls, kind: FactKind, text: str, question: str, *, about: str | None = None, status: int | None = None,
           subject: str = "", setting: str = "", value: str = "") -> ProbeFact:
        """A fact whose anchors and words come from `about` (its text by default); a table cell's row is set on
        it afterwards (`_Collector.add`)."""
        about = text if about is None else about
        return cls(kind=kind, text=text, question=question, anchors=anchors_of(about), words=words_of(about),
                   status=status, subject=normalise(subject), setting=setting, value=value)

    @property
    def category(self) -> Category:
        return CATEGORY_OF[self.kind]

    @property
    def weight(self) -> int:
        return WEIGHTS[self.kind]

    @property
    def key(self) -> str:
        """The fact's identity: a setting is one fact whatever its value (a later value supersedes it); a value of a
        short output is one fact per value (`ss -ltn` run again lists other ports, it does not correct them)."""
        if self.setting and self.question == SHORT_OUTPUT_QUESTION:
            return f"{self.kind.value}:setting:{self.subject}:{self.setting}={normalise(self.value)}"
        if self.setting:  # `subject` is where the setting was stated (a file, a command)
            return f"{self.kind.value}:setting:{self.subject}:{self.setting}"
        return f"{self.kind.value}:{normalise(self.text)}"

    def to_dict(self) -> dict[str, Any]:
        data = {"kind": self.kind.value, "category": self.category.value, "text": self.text, "weight": self.weight,
                "anchors": list(self.anchors), "words": list(self.words), "status": self.status,
                "subject": self.subject, "question": self.question}
        if self.setting:
            data |= {"setting": self.setting, "value": self.value}
        if self.row:
            data |= {"row": list(self.row), "row_name": self.row_name}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeFact:
        """A fact stored with an earlier compaction's score (the cumulative score carries it forward)."""
        kind = FactKind(data["kind"])
        if "anchors" not in data:  # stored before anchors existed: derive them again from the text
            return cls.of(kind, data["text"], data.get("question", ""))
        return cls(kind=kind, text=data["text"], question=data.get("question", ""),
                   anchors=tuple(data.get("anchors") or ()), words=tuple(data.get("words") or ()),
                   status=data.get("status"), subject=data.get("subject", ""), setting=data.get("setting", ""),
                   value=data.get("value", ""), row=tuple(data.get("row") or ()), row_name=data.get("row_name", ""))


def item_key(item: Item) -> str:
    """An identity for an item that survives re-serialisation: role and text for messages, type and call id for
    tool traffic, the canonical JSON otherwise."""
    if is_message(item):
        return f"message:{item.get('role')}:{message_text(item)}"
    kind = item.get("type")
    if kind in TOOL_CALL_KINDS or kind in TOOL_OUTPUT_KINDS:
        if kind in TOOL_CALL_KINDS:
            payload = item.get("arguments", item.get("input", item.get("action")))
        else:
            payload = item.get("output")
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


def arguments(item: Item, *, keep_unparsed: bool = False) -> dict[str, Any]:
    """A function call's arguments as an object (sent as one, or as its JSON text). What is not one is {}, or with
    `keep_unparsed` kept for a reader that scans the text: under "raw" (not JSON) or "value" (JSON, not an object)."""
    raw = item.get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {"raw": str(raw)} if keep_unparsed else {}
    if isinstance(parsed, dict):
        return parsed
    return {"value": parsed} if keep_unparsed else {}


def command_of(item: Item) -> str | None:
    """The command line of a shell call (`["bash", "-lc", script]` unwrapped), its whitespace collapsed, else None."""
    script = _shell_script(item)
    return " ".join(script.split()) if script else None


def _shell_script(item: Item) -> str | None:
    """A shell call's script as sent, its newlines kept (a heredoc's lines are only lines before they collapse)."""
    if item.get("type") == "local_shell_call":
        command = (item.get("action") or {}).get("command")
    elif item.get("type") == "function_call" and item.get("name") in SHELL_TOOLS:
        args = arguments(item)
        command = args.get("command", args.get("cmd"))
    else:
        return None
    if isinstance(command, list):
        command = command[-1] if len(command) == 3 and command[1] in ("-lc", "-c") else " ".join(map(str, command))
    return str(command) if command else None


def output_text(item: Item) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(p.get("text", "") for p in output if isinstance(p, dict))
    if isinstance(output, dict):  # local_shell's {"output": ..., "metadata": {"exit_code": N}}
        return json.dumps(output)
    return json.dumps(output) if output is not None else ""


def call_text(item: Item) -> str:
    """What a tool call says: its name, command, arguments, or a custom tool's free-form input."""
    if item.get("type") == "custom_tool_call":
        return f"{item.get('name', '')} {item.get('input', '')}"
    if item.get("type") == "local_shell_call":
        return f"local_shell {command_of(item) or ''}"
    return f"{item.get('name', '')} {command_of(item) or ''} {item.get('arguments', '')}"


def read_path(item: Item) -> str | None:
    if item.get("type") == "function_call" and item.get("name") in READ_TOOLS:
        args = arguments(item)
        path = args.get("path") or args.get("file") or args.get("file_path")
        return str(path) if path else None
    return None


def _looks_like_path(word: str) -> bool:
    return not word.startswith("-") and ("/" in word or re.search(r"\.[A-Za-z0-9]{1,5}$", word) is not None) \
        and not word.startswith(("http:", "https:")) and "*" not in word


@lru_cache(maxsize=4096)
def _command_reads(command: str) -> tuple[str, ...]:
    return tuple(command_reads(command))


def command_reads(command: str) -> list[str]:
    """Files a shell command reads: the path arguments of `cat`, `head`, `sed -n`, `rg`... in each pipeline step."""
    paths: list[str] = []
    for step in re.split(r"&&|\|\||[|;]", command):
        try:
            words = shlex.split(step)
        except ValueError:
            words = step.split()
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program not in READ_PROGRAMS:
            continue
        for word in words[1:]:
            if word in (">", ">>", "<", "2>", "2>&1"):
                break
            if _looks_like_path(word) and not re.match(r"^\d+(,\d+)?p$", word) and word not in paths:
                paths.append(word)
    return paths


def changed_paths(item: Item) -> list[str]:
    """Files a call changes: apply_patch's `*** Update/Add/Delete File:` lines (function, custom or shell heredoc),
    or the path of an edit/write tool."""
    kind = item.get("type")
    if kind == "custom_tool_call":
        return PATCH_FILE.findall(str(item.get("input") or ""))
    if kind == "function_call" and item.get("name") in PATCH_TOOLS:
        args = arguments(item)
        body = args.get("input") or args.get("patch") or ""
        paths = PATCH_FILE.findall(str(body))
        if not paths and (args.get("path") or args.get("file_path")):
            paths = [str(args.get("path") or args.get("file_path"))]
        return paths
    script = _shell_script(item)
    return PATCH_FILE.findall(script.replace("\\n", "\n")) if script and "apply_patch" in script else []


def exit_code(output: str) -> int | None:
    match = EXIT_CODE.search(output)
    if not match:
        return None
    return int(match.group(1) if match.group(1) is not None else match.group(2))


def output_body(output: str) -> list[str]:
    """The output's own lines: the shell header (Chunk ID, Wall time, exit status, Output:) left out."""
    text = output
    if output.lstrip().startswith("{"):
        try:
            parsed = json.loads(output)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            text = parsed["output"]
    # A measurement's spread (`331.4 ms ± 9.3 ms`) is part of it, not a second value of its name.
    return [SPREAD.sub("", line).strip() for line in text.splitlines()
            if line.strip() and not OUTPUT_HEADER.match(line.strip())]


def _table_row(line: str, header: str | None) -> str:
    """A failing row of a table (`kubectl get pods`) as what identifies it: its first cell and the cells that read
    as a failure ("refund-api-7d9f OOMKilled"), not its ages and counters."""
    if header is None:
        return line
    cells = TABLE_CELLS.split(line.strip())
    if len(cells) < 3:
        return line
    failing = [cell for cell in cells[1:] if ERROR_LINE.search(cell)]
    return " ".join([cells[0], *failing]) if failing else line


# Where a failure was raised: pytest's `src/a.py:212: AssertionError`, a compiler's `src/a.c:12:5: error`,
# TypeScript's and MSBuild's `src/a.ts(12,5): error TS2345`, Python's `File "src/a.py", line 212, in f`, a
# JavaScript stack's `at f (src/a.js:12:5)`.
LOCATION = re.compile(
    r"(?<![\w/.-])(/?(?:[\w.-]+/)*[\w.-]+\.[A-Za-z]{1,6})(?::(\d+)(?::\d+)?\b|\((\d+),\d+\))|"
    r"File \"([^\"]+)\", line (\d+)")
# A frame of a stack that lists the innermost call first: Java's and JavaScript's `at f(File.java:12)`, Go's
# `\t/src/a/b.go:311 +0x1a4` under `goroutine 7 [running]:`. Python's traceback lists it last.
FIRST_FRAME_FIRST = re.compile(r"^at\s|^\S+:\d+ \+0x[0-9a-f]+$")
# A frame of the language's own library or runtime, not where the program went wrong.
LIBRARY_FRAME = re.compile(r"java\.base/|\bjdk\.internal\.|\bsun\.|node:internal|/usr/(?:local/)?lib/|/go/src/|"
                           r"\bruntime/|\bSystem\.Private\.")


def failure_location(output: str, code: int | None) -> tuple[str, str] | None:
    """The line and the place (`path:line`) where a failing command's failure was raised: the innermost frame of
    the program's own code, not a test's own id. Python's traceback and a report list it last; a Java, JavaScript
    or Go stack lists it first (`FIRST_FRAME_FIRST`), where a frame of the runtime's own library is passed over.
    None for a command that did not fail."""
    if code in (None, 0):
        return None
    places = [(line, place) for line in output_body(output) for place in [place_in(line)] if place is not None]
    if not places:
        return None
    frames = [(line, place) for line, place in places if FIRST_FRAME_FIRST.search(line)]
    if frames and "most recent call last" not in output:
        own = [frame for frame in frames if not LIBRARY_FRAME.search(frame[0])]
        return (own or frames)[0]
    return places[-1]


def place_in(line: str) -> str | None:
    """The last place (`path:line`) a line names, in any of LOCATION's forms; None when it names none (a test's
    own id, `tests/a.py::test_x`, is not a place)."""
    found = None
    for match in LOCATION.finditer(line):
        if match.group(1):
            path, number = match.group(1), match.group(2) or match.group(3)
        else:
            path, number = match.group(4), match.group(5)
        if "::" not in line[match.end():match.end() + 2]:
            found = f"{path}:{number}"
    return found


def _error_about(line: str, command: str) -> str | None:
    """What proves a failure line by its values rather than its prose: for a line that names its place, the place
    and the line's own identifiers (its error code or class: "TS2345 at src/a.ts line 12" states `src/a.ts(12,5):
    error TS2345: Argument of type ...`); else the identifiers the line adds to its command (a timestamp, a pid or
    the command's own arguments are not the failure), when they say what failed by themselves: two or more (an
    exception and the file it names, an order and its decline code) or an error code (`E0382`, `ORA-00942`). None
    otherwise (the line is proved by its anchors and words)."""
    request = HTTP_FAILURE.search(line)
    if request is not None:  # a server's log line: the request that failed and its status, not the client's details
        return f"{request.group('target')} {request.group('status')}"
    place = place_in(line)
    if place is None:
        own = set(anchors_of(command))
        # (anchors are stripped of their dashes: `--order` of the command is its `order`)
        names = [a for a in names_of(anchors_of(line)) if a not in own and not line_flag(line, a)]
        codes = [a for a in names if is_code(a)]
        # What the failure is about (a path, an id, a code), not its class: "data/raw/x.parquet does not exist"
        # states `FileNotFoundError: ... 'data/raw/x.parquet'`.
        values = [KIND_PREFIX.sub("", a) for a in names
                  if (any(ch.isdigit() or ch == "_" for ch in a) or PATH_LIKE.search(a)) and not CLASS_NAME.search(a)]
        # A name that extends another one is that thing qualified (`worker-3_refunds` of `worker-3`).
        values = [a for a in values if not any(b != a and b in a for b in values)]
        if len(names) >= 2 and values:
            return " ".join(values)
        return " ".join(codes) if codes else None
    names = [a for a in anchors_of(line) if not any(sep in a for sep in "/.,:") and any(ch.isalpha() for ch in a)]
    return " ".join([place, *names])


# An access log's failed request (`"POST /v1/x HTTP/1.1" 502 173 ...`): its target and its status say what failed.
HTTP_FAILURE = re.compile(r"\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (?P<target>/\S*) HTTP/[\d.]+\"? "
                          r"(?P<status>[45]\d\d)\b")


# An exception's or an error's class (`FileNotFoundError`, `java.sql.SQLSyntaxErrorException`): its kind, which a
# summary may say in words.
CLASS_NAME = re.compile(r"(?:error|exception|fault|failure)$")


# A resource's kind before its name (`pod/worker-3`, `deployment/api-7`): the name is what a summary repeats.
KIND_PREFIX = re.compile(r"^[a-z]{2,16}/(?=[\w.-]*\d[\w.-]*$)")
# A path, not two words with a slash ("username/password"): a file extension or two folders.
PATH_LIKE = re.compile(r"\.[a-z0-9]{1,6}$|/.*/")


def line_flag(line: str, anchor: str) -> bool:
    """Whether an anchor of a line is a command-line option there (`--rebuild`), not a value."""
    return f"--{anchor}" in line.lower()


def error_lines(output: str, code: int | None) -> list[str]:
    """The failure lines of an output: the first and the last line that reads as a failure; for a command that
    exited non-zero with none of those, its last line (what a failure usually ends with). A table's row is
    reduced to its name and failing cells."""
    body = output_body(output)
    header = next((line for line in body[:3] if TABLE_HEADER.match(line)), None)
    errors = [_table_row(line, header) for line in body if ERROR_LINE.search(line) and line != header]
    if not errors and code not in (None, 0) and body:
        errors = [body[-1]]
    picked = errors[:1] + [e for e in errors[-1:] if e not in errors[:1]]
    # A line between them that names the failure by its code (`java.sql...Exception: ORA-00942: ...`, `npm ERR!
    # code ERESOLVE`): the failure itself, where the first and last lines are often its frame.
    coded = next((e for e in errors[1:-1] if any(is_code(a) for a in anchors_of(e))), None)
    return [*picked[:MAX_ERRORS_PER_OUTPUT], *([coded] if coded else [])]


def source_of(call: Item | None) -> str:
    """Where a tool output's settings live: the file its call read, else its command line, else the tool's name.
    The same setting in two files is two settings; the same file read again states its current value."""
    if call is None:
        return "a tool"
    reads = [path for path in _command_reads(command_of(call) or "") if not path.startswith(".")]
    return read_path(call) or (reads[-1] if reads else None) or command_of(call) or str(call.get("name") or "a tool")


Statements = tuple[dict[int, list[Statement]], dict[tuple[str, str], Statement]]


def history_statements(context: list[Item]) -> Statements:
    """The statements of each item of a history (by position) and the latest value of each setting (by source and
    name). Settings are named by tool outputs; messages and calls restate them (a correction, which applies to the
    setting of that name wherever it was read); summaries are not read."""
    calls = {i.get("call_id"): i for i in context if i.get("type") in TOOL_CALL_KINDS}
    by_item: dict[int, list[Statement]] = {}
    for index, item in enumerate(context):
        if item.get("type") in TOOL_OUTPUT_KINDS:
            call = calls.get(item.get("call_id"))
            source = normalise(source_of(call))
            body = output_body(output_text(item))
            own = version_statement(command_of(call) or "", body) if call is not None else None
            found = [replace(s, source=source) for s in ([own] if own else structured(body))]
            if found:
                by_item[index] = found
    names = {s.name for found in by_item.values() for s in found}
    for index, item in enumerate(context):
        if is_message(item) and not is_summary_message(item):
            text = message_text(item)
        elif item.get("type") in TOOL_CALL_KINDS:
            text = call_text(item)
        else:
            continue
        found = restated(text, names)
        if found:
            by_item[index] = found
    return by_item, latest_values([s for index in sorted(by_item) for s in by_item[index]])


def current_values(facts: list[ProbeFact], statements: Statements) -> list[ProbeFact]:
    """Facts carried from an earlier compaction, their settings brought to the latest value the history states
    (`history_statements`: a value corrected since is judged at its new value)."""
    _, latest = statements
    out = []
    for fact in facts:
        now = latest.get((fact.subject, fact.setting)) if fact.setting else None
        if now is not None and now.value != fact.value:
            fact = ProbeFact.of(fact.kind, f"{now.key} = {now.value} (in {now.source})", fact.question,
                                about=now.value, subject=now.source, setting=now.name, value=now.value)
        out.append(fact)
    return out


def _latest(statement: Statement, latest: dict[tuple[str, str], Statement],
            by_name: dict[str, list[str]]) -> list[Statement]:
    """The latest value of each setting a statement names: its own source's, or, for a restatement (no source),
    the settings it corrects."""
    if statement.source:
        return [latest[(statement.source, statement.name)]]
    return [latest[(source, statement.name)] for source in corrected_sources(statement, by_name)]


def sole_value(output: str) -> str | None:
    """The value an output is made of when it is one distinctive token (`git rev-parse` gives a digest, `node
    --version` a version, a create command an id): a fact though the agent never repeats it."""
    body = output_body(output)
    if len(body) != 1 or len(body[0].split()) != 1:
        return None
    token = body[0].strip("'\"`")
    return token if SOLE_VALUE.fullmatch(token) else None


# An output of at most this many lines was asked for what it says: each value in it is a fact.
SHORT_OUTPUT_LINES = 4
MAX_SHORT_OUTPUT_VALUES = 8
# A line stating at most this many values states one thing (a schedule, a range, a count and its unit): its values
# are one fact, kept when all of them are stated. A line with more is a list of measurements, each its own fact.
MAX_VALUES_PER_LINE_FACT = 3
# Any token holding a digit, after an optional comparison (`>=18.17`, `<21`, `^1.4`): what a line states, whatever
# its shape. A shell redirection (`2>&1`) and a row count (`(1 row)`) state nothing.
VALUE_BEARING = re.compile(r"(?<![\w.])[<>=~^!]*(?P<v>[\w./:+%-]*\d[\w./:+%-]*)")
REDIRECTION = re.compile(r"(?<![\w.])\d*[<>]>?&\d*|(?<![\w.])[012]>>?(?=\s|/)")
ROW_COUNT = re.compile(r"^\s*\(\d+ rows?\)\s*$")


def _unredirected(line: str) -> str:
    """The line with its shell redirections blanked, each by as many spaces as it had characters: a value's offset
    in it is its offset in the line, where the word before it names it."""
    return REDIRECTION.sub(lambda match: " " * len(match.group()), line)


def _line_values(line: str, call: str, called: set[str]) -> list[str]:
    """Every value a line states (any token holding a digit; a path by its last part when that holds a digit), once
    each, but those its call holds (the caller leaves out those already facts)."""
    found: list[str] = []
    for match in VALUE_BEARING.finditer(_unredirected(line)):
        raw = match.group("v").rstrip(".,:;")
        last = raw.rpartition("/")[2]  # the whole token when it has no slash
        value = last if re.search(r"\d", last) else raw
        in_call = raw.lower() in called or value.lower() in called or \
            (any(ch.isalpha() for ch in value) and value.lower() in call)
        if not value or in_call or value in found:
            continue
        found.append(value)
    return found


def short_output_values(output: str, call: str, known: set[str], command: str = "") -> list[tuple[str, str, str]]:
    """The values a short output states without naming them (`du -sh d` prints `1.2G  d`, `git log -1
    --format=%cd` a date, `psql -c 'select count(*) ...'` a number under its column, `crontab -l` a schedule, a
    version range), as (name, value, line): the name is the word before the value on its line, else its column's
    header, else the program's output. A line of at most MAX_VALUES_PER_LINE_FACT values is one fact whose value is
    all of them (joined by VALUE_GROUP_SEPARATOR: `5 3 * * * nightly.sh` is kept by its minute, hour and script
    together, `>=18.17 <21` by both bounds); a longer line gives each value it states by what it is
    (`typed_values`). Values its call already holds (the folder `du` was asked about) and values already facts
    (`known`) are left out."""
    body = output_body(output)
    if not body or len(body) > SHORT_OUTPUT_LINES or is_table(body):  # a table's cells are the table reader's
        return []
    known = known | named_values(body)
    header = body[0].split() if len(body) > 1 and not any(ch.isdigit() for ch in body[0]) else []
    words = (command or "").split()  # a call that is no shell call has None
    program = words[0].rpartition("/")[2] if words else "the"
    found: list[tuple[str, str, str]] = []
    lowered = call.lower()
    called = set(re.split(r"[\s'\"`=,;()]+", lowered))

    def name_at(line: str, start: int) -> str:
        before = re.findall(r"(?<![\w.])([A-Za-z][\w.-]*)\W{0,3}$", line[:start])
        column = len(line[:start].split())
        label = re.match(r"\s*([A-Za-z][\w.-]*)", line)  # a list's label: vegeta's `Latencies  [...]  3.1ms, ...`
        return before[0] if before else header[column] if column < len(header) else \
            label.group(1) if label else f"{program} output"

    for line in body[1:] if header else body:
        if ROW_COUNT.match(line):
            continue
        values = _line_values(line, lowered, called)
        # A catch-all only for a line no rule read: its values all new (not a setting's, not used), none of them
        # a value `typed_values` knows by its form (an address, a date, a quantity, an id), which stands alone.
        if values and len(values) <= MAX_VALUES_PER_LINE_FACT and \
                not any(v in k or k in v for v in values for k in known if k) and \
                all(m.lastgroup == "number" for m in TYPED.finditer(line)):
            start = _unredirected(line).find(values[0])
            found.append((name_at(line, max(start, 0)), VALUE_GROUP_SEPARATOR.join(values), line.strip()))
        else:
            for start, value in typed_values(line):
                # Left out: a value its call holds, one already a fact, or one holding such a fact (the address
                # `0.0.0.0:18001` of a port 18001 the agent went on to use).
                if any(value in k or k in value for k in known if k) or value.lower() in lowered or \
                        any(value == v for _, v, _ in found):
                    continue
                found.append((name_at(line, start), value, value))
        if len(found) >= MAX_SHORT_OUTPUT_VALUES:
            return found[:MAX_SHORT_OUTPUT_VALUES]
    return found


class _Collector:
    def __init__(self) -> None:
        self.facts: dict[str, ProbeFact] = {}

    def add(self, kind: FactKind, text: str, question: str, *, row: tuple[str, ...] = (), row_name: str = "",
            **kwargs: Any) -> None:
        text = " ".join(text.split())[:MAX_FACT_CHARS]
        if not text:
            return
        fact = ProbeFact.of(kind, text, question, **kwargs)
        if row:
            fact = replace(fact, row=tuple(row), row_name=row_name)
        if not fact.anchors and not fact.words and not fact.setting:  # a setting has its name and value
            return
        self.facts.setdefault(fact.key, fact)


def _uses(context: list[Item]) -> dict[str, list[int]]:
    """Where each value token is used by the agent: positions of assistant messages and tool calls mentioning it."""
    found: dict[str, list[int]] = {}
    for index, item in enumerate(context):
        if is_message(item, "assistant"):
            text = message_text(item)
        elif item.get("type") in TOOL_CALL_KINDS:
            text = call_text(item)
        else:
            continue
        for token in set(VALUE_TOKEN.findall(text)):
            found.setdefault(token, []).append(index)
    return found


def used_values(output: str, position: int, uses: dict[str, list[int]], call: str,
                stated: frozenset[str] = frozenset()) -> list[str]:
    """Values of an output that the agent used after seeing it (and that its own call did not already hold). A
    value the output states for a named setting (`stated`) is that setting's fact, whose value may be superseded."""
    values: list[str] = []
    for token in VALUE_TOKEN.findall("\n".join(output_body(output))):
        if token in values or token in call or token in stated or not any(i > position for i in uses.get(token, ())):
            continue
        if token.isalpha():
            continue
        values.append(token)
        if len(values) == MAX_VALUES_PER_OUTPUT:
            break
    return values


def extract_facts(items: list[Item], context: list[Item] | None = None,
                  statements: Statements | None = None) -> list[ProbeFact]:
    """The probe facts of `items` (normally what left the window), deduplicated, in order of appearance.
    `context` is the whole history they came from: a value in an output is a fact when the agent used it later
    (in a message or a call), possibly in an item still in the window. `statements` are the context's
    (`history_statements`), when the caller has them already."""
    c = _Collector()
    context = items if context is None else context
    positions = {id(item): index for index, item in enumerate(context)}
    stated, latest = statements if statements is not None else history_statements(context)
    by_name: dict[str, list[str]] = {}
    for source, name in latest:
        by_name.setdefault(name, []).append(source)
    uses = _uses(context)
    outputs = {i.get("call_id"): i for i in items if i.get("type") in TOOL_OUTPUT_KINDS}
    calls = {i.get("call_id"): i for i in context if i.get("type") in TOOL_CALL_KINDS}
    in_items = {id(i) for i in items}
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
                # A message of one sentence is a goal, and also a constraint when it restricts or sets a measure
                # ("keep it under 30% CPU on the primary"): a summary must keep it with its number and its bound.
                if MEASURE.search(sentence) or CONSTRAINT.search(sentence):
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
            for read in command_reads(command or ""):
                c.add(FactKind.FILE_READ, read, "Which files were read?")
            output = outputs.get(item.get("call_id"))
            text = output_text(output) if output is not None else ""
            code = exit_code(text) if output is not None else None
            if command:
                values = anchors_of(command)
                if code == 0 and values and not output_body(text):
                    # A command that printed nothing and succeeded is its effect (`git mv a b`, `mkdir -p d`): a
                    # claim of the effect ("moved a to b") states it by its values, with no exit status.
                    c.add(FactKind.COMMAND, f"{command} (exit 0, no output)", "Which commands were run?",
                          about=" ".join(values), subject=command)
                elif code is None:
                    c.add(FactKind.COMMAND, command, "Which commands were run?")
                else:
                    c.add(FactKind.COMMAND, f"exit {code} of {command}", "Which commands were run, and how did "
                          "they exit?", about=command, status=code, subject=command)
            if output is not None:
                for line in error_lines(text, code):
                    c.add(FactKind.ERROR, line, "Which errors were seen?", about=_error_about(line, command or ""))
                place = failure_location(text, code)
                if place is not None:  # proved by the place alone: "line 212 of src/a.py" states it
                    c.add(FactKind.ERROR, f"{place[0]} (raised at {place[1]})", "Where did the failure happen?",
                          about=place[1])
        for statement in stated.get(positions.get(id(item), -1), ()):
            for now in _latest(statement, latest, by_name):
                # A cell of a table of several rows is the row's: its text names the row's values.
                several = now.row_name and now.key.startswith(f"{now.row_name} ")
                row = f"; row {now.row_name}: {' '.join(now.row)}" if several else ""
                c.add(FactKind.VALUE, f"{now.key} = {now.value} (in {now.source}{row})", "Which settings and values "
                      "did you see, with their latest values?", about=now.value, subject=now.source,
                      setting=now.name, value=now.value, row=now.row, row_name=now.row_name)
        if kind in TOOL_OUTPUT_KINDS:
            call = calls.get(item.get("call_id"))
            if call is None or id(call) not in in_items:
                # An output whose call stayed in the window (or has none): its errors still left with it.
                text = output_text(item)
                for line in error_lines(text, exit_code(text)):
                    c.add(FactKind.ERROR, line, "Which errors were seen?")
            call_said = call_text(call) if call is not None else ""
            source = (command_of(call) if call is not None else None) or (call or {}).get("name") or "a tool"
            sole = sole_value(output_text(item))
            if sole is not None:
                c.add(FactKind.VALUE, f"{sole} (from the output of `{source}`)", "Which values did you use?",
                      about=sole)
            own = frozenset(s.value for s in stated.get(positions.get(id(item), -1), ()))
            used = used_values(output_text(item), positions.get(id(item), -1), uses, call_said, own)
            for value in used:
                c.add(FactKind.VALUE, f"{value} (from the output of `{source}`)", "Which values did you use?",
                      about=value)
            where = normalise(source_of(call))
            # The values an output named are its settings (superseded ones too); the others are read for what
            # they are.
            for name, value, said in short_output_values(output_text(item), call_said, {*own, *used, sole or ""},
                                                         command_of(call) if call is not None else ""):
                c.add(FactKind.VALUE, f"{name} = {said} (in {where})", SHORT_OUTPUT_QUESTION,
                      about=value.replace(VALUE_GROUP_SEPARATOR, " "), subject=where, setting=normalise_key(name),
                      value=value)
    if last_goal is not None:
        c.add(FactKind.NEXT_STEP, f"continue: {needle(last_goal)}", "What is the next step?", about=last_goal)
    return list(c.facts.values())
