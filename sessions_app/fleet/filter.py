"""The fleet board's filters (state, kind, provider, policy, text), parsed once from a query string.

The page applies them to the session query; the fleet websocket applies the same filter to each event's session
summary, so a filtered board only receives rows it shows (and a row that stops matching is removed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compactweb.converters import MAX_ID
from sessions_app.fleet.triage import FINISHED, summary_finished

STATES = ("idle", "running", "paused", "stopped", "failed")  # a session's own states (the header counts them)
FILTER_STATES = (*STATES, FINISHED)  # and the board's pseudo-state: nothing drives it any more (fleet.triage)


def _positive_int(value: str | None) -> int | None:
    if value is None or not str(value).strip():
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if 0 < number <= MAX_ID else None  # past 64 bits no row has it (and SQLite would overflow)


@dataclass(frozen=True)
class FleetFilter:
    state: str = ""
    provider: int | None = None
    policy: int | None = None
    text: str = ""
    source: str = ""  # the session's kind: native, imported, followed, replay, gateway (Session.source)

    @classmethod
    def from_query(cls, query: Mapping[str, Any]) -> FleetFilter:
        """Unknown or malformed values are ignored (the board shows everything rather than an error)."""
        state = str(query.get("state") or "").strip()
        return cls(
            state=state if state in FILTER_STATES else "",
            provider=_positive_int(query.get("provider")),
            policy=_positive_int(query.get("policy")),
            text=str(query.get("q") or "").strip()[:200],
            source=str(query.get("kind") or "").strip()[:16],
        )

    @property
    def active(self) -> bool:
        return bool(self.state or self.provider or self.policy or self.text or self.source)

    def matches(self, summary: Mapping[str, Any]) -> bool:
        """Whether a session summary (sessions_app.rollout.selectors.session_summary) passes the filter."""
        if self.state == FINISHED:
            if not summary_finished(summary):
                return False
        elif self.state and summary.get("state") != self.state:
            return False
        if self.provider and summary.get("provider") != self.provider:
            return False
        if self.policy and summary.get("policy") != self.policy:
            return False
        if self.source and summary.get("source") != self.source:
            return False
        return not self.text or self.text.lower() in str(summary.get("title", "")).lower()

    def as_query(self) -> dict[str, str]:
        query = {"state": self.state, "kind": self.source, "provider": self.provider or "", "policy": self.policy or "",
                 "q": self.text}
        return {k: str(v) for k, v in query.items() if v}
