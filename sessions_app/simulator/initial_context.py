"""The initial context a simulated session starts with (spec §1.2, §4.4, §5.3).

Codex injects, before the first user message and again after a compaction that dropped it: a developer message
with the permissions instructions, a contextual user message with the AGENTS.md instructions, and a contextual user
message with the `<environment_context>`. The two user messages are *contextual* (spec §1.2): they never count as
user turns and are dropped by the compaction filters. Token-budget sessions also get a `<context_window>` developer
block naming the thread and its window ids (spec §4.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

from compaction_app.engine.items import Item, user_message

PERMISSIONS_OPEN = "<permissions instructions>"
PERMISSIONS_CLOSE = "</permissions instructions>"
AGENTS_MD_PREFIX = "# AGENTS.md instructions for "

DEFAULT_PERMISSIONS = (
    "Filesystem sandboxing: `sandbox_mode` is `workspace-write`. You may read any file, and write files only inside "
    "the working directory and the system temporary directory.\n"
    "Network access is restricted.\n"
    "Approvals: `approval_policy` is `on-request`. Commands run in the sandbox without asking; ask before running "
    "anything that needs to escape it."
)


def developer_message(text: str) -> Item:
    """A developer message with one input_text part."""
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def permissions_message(text: str = DEFAULT_PERMISSIONS) -> Item:
    """The permissions developer message: `text` wrapped in `<permissions instructions>` tags."""
    return developer_message(f"{PERMISSIONS_OPEN}\n{text.strip()}\n{PERMISSIONS_CLOSE}")


def agents_md_message(cwd: str, instructions: str) -> Item:
    """The AGENTS.md user message (contextual by its prefix, spec §1.2)."""
    return user_message(f"{AGENTS_MD_PREFIX}{cwd}\n\n<INSTRUCTIONS>\n{instructions.strip()}\n</INSTRUCTIONS>")


def environment_context_message(cwd: str, shell: str = "bash") -> Item:
    """The `<environment_context>` user message (contextual by its tags, spec §1.2)."""
    return user_message(
        f"<environment_context>\n  <cwd>{escape(cwd)}</cwd>\n  <shell>{escape(shell)}</shell>\n</environment_context>"
    )


@dataclass(frozen=True)
class ContextWindowIds:
    """The ids a token-budget session's `<context_window>` block lists (spec §4.4, §9)."""

    thread_id: str
    first_window_id: str
    current_window_id: str
    previous_window_id: str | None = None


def context_window_message(ids: ContextWindowIds) -> Item:
    """The `<context_window>` developer block of a token-budget session; Previous is omitted in the first window
    (spec §4.4; the exact wording upstream is unconfirmed)."""
    lines = [
        "<context_window>",
        f"  Thread id: {ids.thread_id}",
        f"  First window id: {ids.first_window_id}",
        f"  Current window id: {ids.current_window_id}",
    ]
    if ids.previous_window_id:
        lines.append(f"  Previous window id: {ids.previous_window_id}")
    lines.append(
        "  When this window is nearly full and your progress is written down, call the `new_context` tool to "
        "continue in a fresh window."
    )
    lines.append("</context_window>")
    return developer_message("\n".join(lines))


def initial_context_items(
    *,
    cwd: str,
    agents_md: str,
    permissions: str = DEFAULT_PERMISSIONS,
    shell: str = "bash",
    window_ids: ContextWindowIds | None = None,
) -> list[Item]:
    """The full initial context, in Codex's order: developer instructions first, then the contextual user
    messages (spec §5.3). `window_ids` adds the token-budget `<context_window>` block (spec §4.4)."""
    items = [permissions_message(permissions)]
    if window_ids is not None:
        items.append(context_window_message(window_ids))
    items.append(agents_md_message(cwd, agents_md))
    items.append(environment_context_message(cwd, shell))
    return items
