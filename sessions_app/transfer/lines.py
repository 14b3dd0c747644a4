"""A session's rollout read back as projection lines, and what the transfer features recognise in those lines."""

from __future__ import annotations

from collections.abc import Iterator

from compaction_app.engine.items import SUMMARY_PREFIX
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p

THREAD_ROLLBACK_SOURCES = frozenset({"thread_rollback", "codex_thread_rolled_back"})


def strip_summary_prefix(message: str) -> str:
    """A compacted line's message without the summary prefix Codex puts before the summary."""
    head = SUMMARY_PREFIX + "\n"
    return message[len(head):] if message.startswith(head) else message


def fold_lines(session_id: int) -> Iterator[p.Line]:
    """A session's rollout, oldest first, as the projection's lines, read in chunks."""
    rows = (
        RolloutLine.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list("seq", "kind", "payload", "tokens", "item_tokens")
    )
    for seq, kind, payload, tokens, item_tokens in rows.iterator(chunk_size=2000):
        yield p.Line(seq=seq, kind=kind, payload=payload, tokens=tokens, item_tokens=item_tokens)
