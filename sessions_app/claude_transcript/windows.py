"""The context window of the Claude model a transcript names (issue 47 item 8): Claude Code writes no window into
its transcript, so an imported or followed Claude session is measured against its model's, not against the window
of whatever provider the import was given (a 32k simulated model would show a Claude session always "over").

Anthropic's models have a 200,000-token window; the 1M-token beta is asked for per request and Claude Code marks a
model that uses it with a `[1m]` suffix. Plain Python, no Django.
"""

from __future__ import annotations

CLAUDE_WINDOW = 200_000
CLAUDE_LONG_WINDOW = 1_000_000


def model_context_window(model: str | None) -> int | None:
    """The window of a Claude model named `model`; None for a name that is not a Claude model's (nothing known)."""
    if not model or not model.lower().startswith("claude"):
        return None
    return CLAUDE_LONG_WINDOW if model.lower().endswith("[1m]") else CLAUDE_WINDOW
