"""Which sessions an on-call operator looks at first: the fleet board's default order.

A session that nothing drives any more ("finished": stopped, failed, or idle while no client can send it a turn)
will never compact again however far over its limit it stands, so it ranks after every session that can: running,
paused (a person means to resume it), and idle followed or gateway sessions (their Codex CLI may send the next turn
at any moment). Within each group the nearest to its auto-compact limit comes first (sessions_app.fleet.paging.fill).
The database ranks a page with the same rule (sessions_app.live.selectors), the browser keeps it after live updates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FINISHED = "finished"  # a pseudo-state of the board's State filter, and the mark a finished row carries

ENDED_STATES = ("stopped", "failed")
# Idle sessions of these kinds have no client left to send a turn: a native session's simulated run ended (or it was
# made through the API and nothing appends to it now), an import and a replay are done once they land.
UNDRIVEN_KINDS = ("native", "imported", "replay")


def is_finished(*, state: str, source: str) -> bool:
    return state in ENDED_STATES or (state == "idle" and source in UNDRIVEN_KINDS)


def summary_finished(summary: Mapping[str, Any]) -> bool:
    """`is_finished` of a session summary (sessions_app.rollout.selectors.session_summary)."""
    return is_finished(state=str(summary.get("state") or ""), source=str(summary.get("source") or ""))
