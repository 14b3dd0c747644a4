"""Sessions that cannot go on by themselves (plain Python, no Django): the spec's overflow situations in which Codex
itself stays stuck, and the recoveries that can still help.

Every turn starts with the pre-turn check (spec §2.4): over the auto-compact limit, it compacts, and a pre-turn
failure ends the turn without sampling (§6.5). So a session whose history cannot be brought back under its window
fails the same way on every turn. That happens when:

1. remote compaction (v1 or v2) failed with `context_window_exceeded`: remote sends the whole history, only tool
   outputs trimmed first (§6.3), so it fails again; local summarisation drops the oldest items until the prompt
   fits (§6.1), and a new window (token budget, §4.4) keeps only the initial context;
2. local summarisation failed with `context_window_exceeded`: it had trimmed down to one item that still does not
   fit ("Codex ran out of room", §6.1), so another local attempt fails too; only a new window helps;
3. a compaction completed but left the history at or over the usable window (§2.2: e.g. remote v2 retains up to
   64k tokens of user messages, §5.4, more than a small window holds): the next request overflows the model's
   window and the next pre-turn compaction starts from the same place. A new window helps, and local summarisation
   when it was not the method that left it there.

Any other failure (a provider error, a hook stop) is retried by the next turn and is not "stuck".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compaction_app.engine.provider_errors import ErrorKind
from compaction_app.engine.vocabulary import IMPLEMENTATIONS, AttemptStatus, Strategy

RECOVERIES = {
    "local": "Summarise locally, trimming the oldest items until it fits",
    "token_budget": "Start a new window with only the initial context",
}
LOCAL_METHODS = frozenset({Strategy.LOCAL.value, IMPLEMENTATIONS[Strategy.LOCAL].value})


@dataclass(frozen=True)
class Stuck:
    """Why a session cannot go on, and the recoveries (keys of RECOVERIES) that can still help, best first."""

    reason: str
    recoveries: tuple[str, ...]


def _is_local(attempt: Mapping[str, Any]) -> bool:
    return bool({attempt.get("strategy"), attempt.get("implementation")} & LOCAL_METHODS)


def stuck_state(attempt: Mapping[str, Any] | None, summary: Mapping[str, Any] | None = None) -> Stuck | None:
    """The session's stuck state from its newest compaction attempt's view (and, for situation 3, its live numbers:
    `tokens_in_window`, `usable_context_window`), or None when it can go on."""
    if not attempt:
        return None
    status = attempt.get("status")
    if status == AttemptStatus.FAILED and attempt.get("error_kind") == ErrorKind.CONTEXT_WINDOW_EXCEEDED.value:
        if _is_local(attempt):
            return Stuck("Even the newest item alone does not fit the model's context window: local summarisation "
                         "trimmed everything it could and failed (context window exceeded).", ("token_budget",))
        return Stuck("The history no longer fits the model's context window: every turn's compaction fails "
                     "(context window exceeded).", ("local", "token_budget"))
    if status == AttemptStatus.COMPLETED and summary:
        usable = summary.get("usable_context_window")
        tokens = summary.get("tokens_in_window")
        after = attempt.get("tokens_after")
        if usable and tokens is not None and after is not None and min(int(after), int(tokens)) >= int(usable):
            recoveries = ("token_budget",) if _is_local(attempt) else ("local", "token_budget")
            return Stuck(f"The last compaction left {int(after):,} tokens, more than the usable window of "
                         f"{int(usable):,}: the next request overflows the model's context window.", recoveries)
    return None


def stuck_reason(attempt: Mapping[str, Any] | None, summary: Mapping[str, Any] | None = None) -> str | None:
    """Why the session cannot go on, or None when it can."""
    state = stuck_state(attempt, summary)
    return state.reason if state else None
