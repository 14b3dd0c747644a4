"""Short, single-line reasons from text another server chose (issue 27): a webhook's stop reason, a provider's
error message. Operators read these; the rest of what the remote side sent is not kept."""

from __future__ import annotations

MAX_REASON_CHARS = 200


def short_reason(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """`text` on one line, without control characters, at most `limit` characters."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
