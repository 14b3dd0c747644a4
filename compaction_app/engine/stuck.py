"""Sessions that cannot go on by themselves (plain Python, no Django).

A session is stuck when its newest compaction attempt failed because the history no longer fits the model's context
window (`context_window_exceeded`): every next turn's pre-turn compaction fails the same way (spec §6.5: a
pre-turn failure ends the turn without sampling), which is where Codex itself stays stuck. Remote compaction sends
the whole history (only tool outputs are trimmed first, spec §6.3), so it cannot recover; local summarisation drops
the oldest items until the prompt fits (spec §6.1), and a new window (token budget, spec §4.4) keeps only the
initial context. Those are the two recoveries the fleet board offers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction_app.engine.provider_errors import ErrorKind

RECOVERIES = {
    "local": "Summarise locally, trimming the oldest items until it fits",
    "token_budget": "Start a new window with only the initial context",
}


def stuck_reason(attempt: Mapping[str, Any] | None) -> str | None:
    """Why the session cannot go on (from its newest compaction attempt's view), or None when it can."""
    if not attempt or attempt.get("status") != "failed":
        return None
    if attempt.get("error_kind") != ErrorKind.CONTEXT_WINDOW_EXCEEDED.value:
        return None
    return ("The history no longer fits the model's context window: every turn's compaction fails "
            "(context_window_exceeded).")
