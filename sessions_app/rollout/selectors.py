"""Reads of sessions: lists, one session's live summary, its history and its rollout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from compaction_app.engine.items import Item
from compaction_app.limits import auto_compact_limit
from sessions_app.models import LiveItem, RolloutLine, Session


def list_sessions(*, state: str | None = None) -> QuerySet[Session]:
    sessions = Session.objects.select_related("provider", "policy")
    if state:
        sessions = sessions.filter(state=state)
    return sessions


def get_session(*, session_id: int) -> Session:
    """One session with its provider and policy; raises Session.DoesNotExist."""
    return Session.objects.select_related("provider", "policy").get(pk=session_id)


def session_summary(*, session: Session) -> dict[str, Any]:
    """The live numbers of a session, all O(1) reads of cached fields."""
    return {
        "id": session.pk,
        "title": session.title,
        "state": session.state,
        "source": session.source,
        "thread_id": str(session.thread_id),
        "provider": session.provider_id,
        "policy": session.policy_id,
        "model": session.model,
        "window_number": session.window_number,
        "window_id": session.window_id,
        "previous_window_id": session.previous_window_id or None,
        "first_window_id": session.first_window_id,
        "tokens_in_window": session.tokens_in_window,
        "context_window": session.provider.context_window,
        "usable_context_window": session.provider.usable_context_window,
        "auto_compact_limit": auto_compact_limit(provider=session.provider, policy=session.policy),
        "auto_compact_scope": session.policy.auto_compact_scope,
        "window_prefill": session.meter_prefill,
        "compaction_count": session.compaction_count,
        "live_item_count": session.live_item_count,
        "last_seq": session.last_seq,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


def live_items(*, session: Session) -> list[Item]:
    """The model-visible history now, in order."""
    return list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))


def live_entries(*, session: Session) -> QuerySet[LiveItem]:
    return LiveItem.objects.filter(session=session).order_by("position")


def rollout_lines(*, session: Session, after_seq: int = 0) -> Iterator[RolloutLine]:
    """The rollout in order, streamed from the database in chunks."""
    return (
        RolloutLine.objects.filter(session=session, seq__gt=after_seq).order_by("seq").iterator(chunk_size=1000)
    )


def rollout_line_dicts(*, session_id: int, chunk_size: int, after: int = 0) -> Iterator[dict[str, Any]]:
    """The session's rollout lines after seq `after` as plain dicts (seq, timestamp, kind, payload), read in chunks."""
    # One short query per chunk (no cursor held open between chunks), so a streamed response can pull chunks
    # from whichever thread serves it.
    while True:
        rows = list(
            RolloutLine.objects.filter(session_id=session_id, seq__gt=after)
            .order_by("seq")
            .values_list("seq", "timestamp", "kind", "payload")[:chunk_size]
        )
        if not rows:
            return
        for seq, ts, kind, payload in rows:
            yield {"seq": seq, "timestamp": ts, "kind": kind, "payload": payload}
        after = rows[-1][0]
