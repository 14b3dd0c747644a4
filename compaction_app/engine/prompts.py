"""Fixed texts of compaction: the summarization prompt, the warning and error messages (spec §1.3, §4, §6)."""

from __future__ import annotations

import hashlib

from compaction_app.engine.items import SUMMARY_PREFIX

__all__ = [
    "SUMMARY_PREFIX",
    "SUMMARIZATION_PROMPT",
    "HEADS_UP_WARNING",
    "CONTEXT_WINDOW_EXCEEDED_MESSAGE",
    "REMOTE_ERROR_PREFIX",
    "remote_error_text",
    "V2_STREAM_CLOSED_MESSAGE",
    "LOCAL_STREAM_CLOSED_MESSAGE",
    "v2_wrong_compaction_count_message",
    "reconnecting_message",
    "prompt_version",
]

# spec §1.3: Codex's compact/prompt.md template (the file ends with a newline, which include_str! keeps).
SUMMARIZATION_PROMPT = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will "
    "resume the task.\n"
    "\n"
    "Include:\n"
    "- Current progress and key decisions made\n"
    "- Important context, constraints, or user preferences\n"
    "- What remains to be done (clear next steps)\n"
    "- Any critical data, examples, or references needed to continue\n"
    "\n"
    "Be concise, structured, and focused on helping the next LLM seamlessly continue the work.\n"
)

def prompt_version(text: str) -> str:
    """A prompt's version: the first 12 hex digits of its text's SHA-256, so it changes exactly when the text does
    (a stored prompt edited in place gets a new version; the same text under two names has one)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# spec §4.1 step 14 (local compaction only).
HEADS_UP_WARNING = (
    "Heads up: Long threads and multiple compactions can cause the model to be less accurate. "
    "Start a new thread when possible to keep threads small and targeted."
)

# spec §6.1: the text of Codex's ContextWindowExceeded error.
CONTEXT_WINDOW_EXCEEDED_MESSAGE = (
    "Codex ran out of room in the model's context window. Start a new thread or clear earlier history before "
    "retrying."
)

# spec §4 common frame step 6: remote failures are reported with this prefix.
REMOTE_ERROR_PREFIX = "Error running remote compact task"


def remote_error_text(cause: str) -> str:
    """What Codex reports for a failed remote (v1 / v2) compaction: `Error running remote compact task: <cause>`."""
    return f"{REMOTE_ERROR_PREFIX}: {cause}"

# spec §4.3 step 4 and §4.1 step 4.
V2_STREAM_CLOSED_MESSAGE = "remote compaction v2 stream closed before response.completed"
LOCAL_STREAM_CLOSED_MESSAGE = "stream closed before response.completed"


def v2_wrong_compaction_count_message(compaction_count: int, output_item_count: int) -> str:
    """The fatal remote v2 error when the stream did not carry exactly one compaction item (spec §4.3 step 4)."""
    return (
        f"remote compaction v2 expected exactly one compaction output item, got {compaction_count} "
        f"from {output_item_count} output items"
    )


def reconnecting_message(retries: int, max_retries: int) -> str:
    """The StreamError text emitted before each stream retry (spec §6.2, §4.3 step 5)."""
    return f"Reconnecting... {retries}/{max_retries}"
