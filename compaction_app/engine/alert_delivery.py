"""What an alert destination is sent (issue 45): severities, the message of each delivery event, the HMAC
signature of a JSON webhook and the retry back-off. Plain Python; the rows, the sending and the retries are
sessions_app/compactions/alert_delivery.py and alert_senders.py.

Grouping follows the fleet board's: one alert row per cause (sessions_app/compactions/alerts.py counts repeats on
it), so a destination hears of a cause when it is raised, again as its count doubles (2, 4, 8, ...: a storm that
repeats a hundred times is seven messages, not a hundred), and once when it is acknowledged or falls quiet.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import asdict, dataclass
from enum import StrEnum

from compaction_app.engine.alerts import AlertKind


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)


# How urgent each rule is for whoever is on call: a loop stalls a session and a fleet storm spends the whole fleet's
# budget (act now); a session storm and a failure streak need a look; a re-read costs tokens, not progress.
KIND_SEVERITY: dict[str, Severity] = {
    AlertKind.FLEET_STORM: Severity.CRITICAL,
    AlertKind.LOOP: Severity.CRITICAL,
    AlertKind.STORM: Severity.WARNING,
    AlertKind.FAILURE_STREAK: Severity.WARNING,
    AlertKind.REREAD: Severity.INFO,
}


def severity_of(kind: str) -> Severity:
    """A rule's severity; a rule added later without one is a warning until it is given one."""
    return KIND_SEVERITY.get(kind, Severity.WARNING)


class DeliveryEvent(StrEnum):
    RAISED = "raised"              # the cause's first raise
    UPDATED = "updated"            # its count reached a power of two
    ACKNOWLEDGED = "acknowledged"  # an operator acknowledged it
    RESOLVED = "resolved"          # not raised again within the grouping window: the cause stopped
    TEST = "test"                  # an admin's "send a test message"


def event_for(*, count: int, acknowledged: bool) -> DeliveryEvent | None:
    """Which message an alert's change is worth, or None (a repeat between two powers of two)."""
    if acknowledged:
        return DeliveryEvent.ACKNOWLEDGED
    if count <= 1:
        return DeliveryEvent.RAISED
    return DeliveryEvent.UPDATED if count & (count - 1) == 0 else None


def backoff_seconds(attempt: int, *, base: float, cap: float) -> float:
    """The wait after failed attempt `attempt` (1-based): base, 2×base, 4×base, ... never more than cap."""
    return min(cap, base * 2 ** max(0, attempt - 1))


@dataclass(frozen=True)
class AlertFacts:
    """An alert as every destination is told of it (the JSON webhook's `alert` object)."""

    id: int | None
    kind: str
    severity: str
    message: str
    session_id: int | None
    count: int
    created_at: str | None
    last_at: str | None
    acknowledged_at: str | None = None
    acknowledged_by: str | None = None
    url: str = ""


_HEADLINES = {
    DeliveryEvent.RAISED: "raised",
    DeliveryEvent.UPDATED: "raised again (×{count})",
    DeliveryEvent.ACKNOWLEDGED: "acknowledged by {by}",
    DeliveryEvent.RESOLVED: "resolved: not raised again (×{count} in all)",
    DeliveryEvent.TEST: "test message",
}


def headline(event: DeliveryEvent, facts: AlertFacts) -> str:
    where = f"session {facts.session_id}" if facts.session_id is not None else "the fleet"
    state = _HEADLINES[event].format(count=facts.count, by=facts.acknowledged_by or "an operator")
    return f"[{facts.severity}] compactweb {facts.kind} alert in {where}: {state}"


def _slack_escape(text: str) -> str:
    # Slack's mrkdwn reads &, < and > as markup (links, mentions): text another server or a transcript chose must
    # not become a link or an @channel.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(event: DeliveryEvent, facts: AlertFacts) -> dict:
    """A Slack-compatible incoming-webhook body (Slack, Mattermost, Rocket.Chat read `text`)."""
    text = f"*{_slack_escape(headline(event, facts))}*\n{_slack_escape(facts.message)}"
    if facts.url:
        text += f"\n<{facts.url}|Open in compactweb>"
    return {"text": text}


def webhook_payload(event: DeliveryEvent, facts: AlertFacts) -> dict:
    """The generic JSON webhook's body (docs/alerts.md, "JSON webhook")."""
    return {"event": event.value, "headline": headline(event, facts), "alert": asdict(facts)}


def email_message(event: DeliveryEvent, facts: AlertFacts) -> tuple[str, str]:
    """(subject, plain-text body)."""
    lines = [facts.message, "", f"Rule: {facts.kind} ({facts.severity})", f"Raised: {facts.count} time(s)"]
    if facts.created_at:
        lines.append(f"First raised: {facts.created_at}")
    if facts.last_at:
        lines.append(f"Last raised: {facts.last_at}")
    if facts.url:
        lines += ["", facts.url]
    return headline(event, facts), "\n".join(lines) + "\n"


def body_bytes(payload: dict) -> bytes:
    """The exact bytes a JSON webhook is sent and signed over."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


SIGNATURE_HEADER = "X-Compactweb-Signature"
TIMESTAMP_HEADER = "X-Compactweb-Timestamp"


def signature(secret: bytes, *, timestamp: str, body: bytes) -> str:
    """`sha256=<hex>` of HMAC-SHA256 over `<timestamp>.<body>`: the timestamp is signed so a receiver can refuse
    a replayed old message."""
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
