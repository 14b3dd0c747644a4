"""Compaction attempts orphaned by a dead worker (spec §6.5: a killed compaction leaves the history unchanged).

An attempt runs only under its session's lease, so once somebody else holds that lease, an attempt still marked
`running` belongs to a holder that died: it is finished as `interrupted` when the system notices, which is the moment
its expired lease is taken over (by a compaction, a simulator step, a turn or a rollback alike).
"""

from __future__ import annotations

from django.utils import timezone

from compaction_app.models import CompactionAttempt

STALE_ATTEMPT_MESSAGE = "the worker running this compaction stopped before it finished"


def mark_stale_attempts(*, session_id: int) -> int:
    """Finish the session's `running` attempts as interrupted; returns how many there were."""
    return CompactionAttempt.objects.filter(session_id=session_id, status=CompactionAttempt.Status.RUNNING).update(
        status=CompactionAttempt.Status.INTERRUPTED, error_kind="interrupted", error_message=STALE_ATTEMPT_MESSAGE,
        completed_at=timezone.now(),
    )
