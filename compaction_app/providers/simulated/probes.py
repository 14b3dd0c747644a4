"""The simulated model's answers to retention probes: extractive, from what the request lets it see.

It reads the window it is sent (messages, tool calls and their outputs) and the digests its own compaction items
carry (`codec`), the way its summariser reads a conversation (`summarizer.digest`), and answers a probe's category
with the lines that category asks for. Nothing is invented, so a fact the new window no longer holds is missing
from the answer, and a fact the window states differently is answered in the window's words. It does not use the
retention scorer's fact extractor: the answer is judged against the facts (engine/retention/match.py), not
produced from them. It is not a language model: it cannot infer, paraphrase or recall beyond the window.
"""

from __future__ import annotations

import json
import re
from typing import Any

from compaction_app.engine.items import is_message, is_summary_message, message_text
from compaction_app.engine.retention.facts import Category
from compaction_app.engine.retention.probes import probe_category, probe_questions
from compaction_app.providers.chat_format import assistant_message
from compaction_app.providers.simulated.replies import short_id
from compaction_app.providers.simulated.summarizer import _command_of, _output_text, digest

EXIT_STATUS = re.compile(r"(?:Exit code: |Process exited with code |\"exit_code\"\s*:\s*)(-?\d+)")
PATCHED = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (\S+)", re.MULTILINE)
READERS = ("read_file", "view", "open_file")


def probe_of(body: dict[str, Any]) -> Category | None:
    """The category of a probe request (its last input item is a user message holding a retention probe)."""
    # The last item, found from the end: a request's cost does not grow with the history before it.
    last = next((i for i in reversed(body.get("input") or []) if isinstance(i, dict)), None)
    if last is None or not is_message(last, "user"):
        return None
    return probe_category(message_text(last))


def _visible_artifacts(items: list[dict[str, Any]]) -> list[str]:
    """What the visible tool traffic shows: files read and patched, each command with the status its output
    prints, and the output lines that read as failures."""
    outputs = {i.get("call_id"): i for i in items
               if i.get("type") in ("function_call_output", "custom_tool_call_output")}
    lines = []
    for item in items:
        if item.get("type") == "function_call" and item.get("name") in READERS:
            path = (json.loads(item.get("arguments") or "{}") if isinstance(item.get("arguments"), str)
                    else item.get("arguments") or {}).get("path")
            if path:
                lines.append(f"read `{path}`")
        body = item.get("input") if item.get("type") == "custom_tool_call" else item.get("arguments")
        lines += [f"changed `{p}`" for p in PATCHED.findall(str(body or "").replace("\\n", "\n"))]
        command = _command_of(item)
        output = outputs.get(item.get("call_id"))
        text = _output_text(output) if output is not None else ""
        if command:
            status = EXIT_STATUS.search(text)
            lines.append(f"`{command}` exit code: {status.group(1)}" if status else f"ran `{command}`")
        for line in text.splitlines():
            if line.strip() and re.search(r"(?i)error|fail|assert|mismatch|not found|denied|refused", line):
                lines.append(line.strip())
    return lines


QUESTION_COMMAND = re.compile(r"^How did `(.+)` exit\?")
QUESTION_SETTING = re.compile(r"^What is the latest value of (.+?) \(in (.*)\)\?$")
# What names the thing a setting was read from (`checkout-21`, `export/21`, `shard_7`): a name with a digit.
THING = re.compile(r"[a-z][\w@.-]*\d[\w@.-]*(?:/\d+)?|[a-z][\w-]*/\d+")


def _window_lines(items: list[dict[str, Any]]) -> list[str]:
    """Every line the window shows, in order: messages (summaries included), tool calls and their outputs."""
    lines: list[str] = []
    for item in items:
        if is_message(item):
            text = message_text(item)
        elif item.get("type") in ("function_call_output", "custom_tool_call_output"):
            text = _output_text(item)
        else:
            text = str(item.get("arguments") or item.get("input") or "")
        lines += [line.strip() for line in text.splitlines() if line.strip()]
    return lines


def pointed_answer(items: list[dict[str, Any]], question: str, artifacts: list[str]) -> str:
    """One numbered question answered from the window alone: the line that states the command's status or the
    setting's value (the last such line: the latest), looked for by the setting's name, its longer words, then the
    thing it was read from (as a reader would when the summary renamed it), or "I do not know"."""
    command = QUESTION_COMMAND.match(question)
    if command:
        wanted = command.group(1).lower()
        stated = [line for line in [*artifacts, *_window_lines(items)]
                  if wanted in line.lower() and re.search(r"(?i)exit|code|status|passed|failed", line)]
        return stated[-1] if stated else "I do not know."
    setting = QUESTION_SETTING.match(question)
    if setting:
        name = setting.group(1).lower()
        things = {t.strip(".") for t in THING.findall(setting.group(2).lower())}
        lines = [line for line in _window_lines(items) if re.search(r"\d", line)]
        # Of the lines that name the setting, those about the same thing (not a sibling service's port).
        about = [line for line in lines if things & {t.strip(".") for t in THING.findall(line.lower())}]
        stated = [line for line in about if name in line.lower()] or [line for line in lines if name in line.lower()]
        if not stated:  # the name in other words: a line with one of its longer words ("peaked" for peak memory)
            words = [w for w in re.split(r"[_\W]+", name) if len(w) >= 4]
            stated = [line for line in about if any(w in line.lower() for w in words)] or \
                [line for line in lines if any(w in line.lower() for w in words)]
        if not stated:  # the setting renamed: a line about the thing it was read from ("/export/21 answers in 421 ms")
            stated = about
        return stated[-1] if stated else "I do not know."
    return "I do not know."


def probe_answer(items: list[dict[str, Any]], category: Category,
                 questions: list[tuple[int, str]] | None = None) -> str:
    """The extractive answer to one probe over `items` (the probe message itself excluded), then one line per
    numbered question ("A2. ...")."""
    pointed = [f"A{n}. {pointed_answer(items, q, _visible_artifacts(items))}" for n, q in questions or ()]
    d = digest(items, drop_prompt=False)
    if category is Category.RECALL:
        lines = [*d.goals, *d.remembered]
    elif category is Category.ARTIFACT_TRAIL:
        lines = [*_visible_artifacts(items), *(f"file `{f}`" for f in d.files),
                 *(f"ran `{c}`" for c in d.commands), *d.errors]
    elif category is Category.CONTINUATION:
        lines = [*d.next_steps, *(d.goals[-1:])]
    else:
        lines = list(d.progress)
        for item in items:
            if is_message(item, "assistant"):
                lines += [line.strip() for line in message_text(item).splitlines() if line.strip()]
    # A summary in the window is read like the model would read it: every line of it may answer the probe.
    for item in items:
        if is_summary_message(item):
            lines += [line.strip() for line in message_text(item).splitlines()[1:] if line.strip()]
    seen: list[str] = []
    for line in lines:
        if line not in seen:
            seen.append(line)
    return "\n".join([*(seen or ["I do not know."]), *pointed])


def probe_reply(body: dict[str, Any], category: Category) -> list[dict[str, Any]]:
    everything = [i for i in body.get("input") or [] if isinstance(i, dict)]
    items = everything[:-1]
    text = probe_answer(items, category, probe_questions(message_text(everything[-1])))
    return [assistant_message(text, short_id("msg", "probe", category.value, text))]
