"""The simulated model's answers to retention probes: extractive, from what the request lets it see.

It reads the visible history (messages, tool calls and their outputs) and the digests its own compaction items
carry (`codec`), and answers a probe's category with the lines that category asks for. Nothing is invented, so a
fact the new window no longer holds is missing from the answer.
"""

from __future__ import annotations

from typing import Any

from compaction_app.engine.items import is_message, is_summary_message, message_text
from compaction_app.engine.retention.facts import (
    Category,
    changed_paths,
    command_of,
    exit_code,
    output_text,
    read_path,
)
from compaction_app.engine.retention.probes import probe_category
from compaction_app.providers.chat_format import assistant_message
from compaction_app.providers.simulated.replies import short_id
from compaction_app.providers.simulated.summarizer import digest


def probe_of(body: dict[str, Any]) -> Category | None:
    """The category of a probe request (its last input item is a user message holding a retention probe)."""
    # The last item, found from the end: a request's cost does not grow with the history before it.
    last = next((i for i in reversed(body.get("input") or []) if isinstance(i, dict)), None)
    if last is None or not is_message(last, "user"):
        return None
    return probe_category(message_text(last))


def _visible_artifacts(items: list[dict[str, Any]]) -> list[str]:
    outputs = {i.get("call_id"): i for i in items if i.get("type") == "function_call_output"}
    lines = []
    for item in items:
        path = read_path(item)
        if path:
            lines.append(f"read `{path}`")
        lines += [f"changed `{p}`" for p in changed_paths(item)]
        command = command_of(item)
        if command:
            output = outputs.get(item.get("call_id"))
            code = exit_code(output_text(output)) if output is not None else None
            lines.append(f"`{command}` exit code: {code}" if code is not None else f"ran `{command}`")
    return lines


def probe_answer(items: list[dict[str, Any]], category: Category) -> str:
    """The extractive answer to one probe over `items` (the probe message itself excluded)."""
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
    return "\n".join(seen) if seen else "I do not know."


def probe_reply(body: dict[str, Any], category: Category) -> list[dict[str, Any]]:
    items = [i for i in body.get("input") or [] if isinstance(i, dict)][:-1]
    text = probe_answer(items, category)
    return [assistant_message(text, short_id("msg", "probe", category.value, text))]
