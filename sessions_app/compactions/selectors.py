"""Reads of compactions: a session's compactions, one compaction, attempts, and the live history right before
a compaction."""

from __future__ import annotations

from django.db.models import QuerySet

from compaction_app.models import Compaction, CompactionAttempt
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p


def list_compactions(*, session_id: int) -> QuerySet[Compaction]:
    """A session's compactions, oldest first (the order of their `compacted` lines)."""
    return Compaction.objects.filter(session_id=session_id).order_by("rollout_seq")


def get_compaction(*, compaction_id: int) -> Compaction:
    """One compaction; raises Compaction.DoesNotExist."""
    return Compaction.objects.select_related("session").get(pk=compaction_id)


def attempts_for(
    *, compaction: Compaction | None = None, session_id: int | None = None, status: str | None = None
) -> QuerySet[CompactionAttempt]:
    """The attempts of one compaction, or of a session (including failed and interrupted ones), newest first."""
    attempts = CompactionAttempt.objects.select_related("session")
    if compaction is not None:
        attempts = attempts.filter(compaction=compaction)
    if session_id is not None:
        attempts = attempts.filter(session_id=session_id)
    if status:
        attempts = attempts.filter(status=status)
    return attempts.order_by("-started_at", "-pk")


def get_attempt(*, attempt_id: int) -> CompactionAttempt:
    """One attempt with its hook runs; raises CompactionAttempt.DoesNotExist."""
    return CompactionAttempt.objects.select_related("session").prefetch_related("hook_runs").get(pk=attempt_id)


def _line(row: RolloutLine) -> p.Line:
    return p.Line(seq=row.seq, kind=row.kind, payload=row.payload, tokens=row.tokens, item_tokens=row.item_tokens)


def history_before(*, session_id: int, seq: int) -> list[p.Entry]:
    """The live history right before rollout line `seq`: the projection fold (spec §8.2) of the lines before it.

    The fold starts at the newest history-installing line before `seq` (everything earlier is replaced by it), so
    the cost is O(lines since the previous compaction), not O(rollout).
    """
    base = (
        RolloutLine.objects.filter(session_id=session_id, seq__lt=seq, kind__in=p.HISTORY_INSTALLING_KINDS)
        .order_by("-seq").values_list("seq", flat=True).first()
    )
    start = base if base is not None else 1
    projection = p.Projection()
    projection.header = p.Header(last_seq=start - 1)
    rows = RolloutLine.objects.filter(session_id=session_id, seq__gte=start, seq__lt=seq).order_by("seq")
    for row in rows.iterator(chunk_size=1000):
        projection.apply(_line(row))
    return projection.entries
