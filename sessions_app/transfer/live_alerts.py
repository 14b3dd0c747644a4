"""The alert rules on a followed or shipped file's appended lines (issue 44): what Codex or Claude Code wrote while
it was followed is live, so its compactions feed the storm, loop and re-read rules as a compaction compactweb ran
does (sessions_app.compactions.alerts), and its new items feed the session's watch like a turn's.

The live history before the batch is read only when the batch holds a compaction (the rules compare what it
dropped with what comes next); other batches cost one read of the session's watch.
"""

from __future__ import annotations

from typing import Any

from compaction_app.models import Compaction
from sessions_app.compactions import alerts
from sessions_app.models import LiveItem, RolloutLine, Session
from sessions_app.rollout import projection as p


def history_before(*, session: Session, kinds: list[str]) -> list[dict[str, Any]] | None:
    """The live history before lines of these kinds are appended, when one of them is a compaction; else None."""
    if p.COMPACTED not in kinds:
        return None
    return list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))


def run_alert_rules(*, session: Session, rows: list[RolloutLine], before: list[dict[str, Any]] | None) -> None:
    """Run the rules on appended rows (inside the append's transaction): each compaction with the history it
    replaced, then the items since as a turn."""
    if not rows:
        return
    if before is not None:
        compactions = {c.rollout_seq: c for c in Compaction.objects.filter(
            session=session, rollout_seq__in=[r.seq for r in rows if r.kind == p.COMPACTED])}
        history = list(before)
        for row in rows:
            if row.kind == p.RESPONSE_ITEM:
                history.append(row.payload)
            elif row.kind in p.HISTORY_INSTALLING_KINDS and isinstance(row.payload.get("replacement_history"), list):
                after = list(row.payload["replacement_history"])
                if row.seq in compactions:
                    alerts.record_compaction(compaction=compactions[row.seq], before=history, after=after)
                history = after
    alerts.record_turn(session_id=session.pk, first_seq=rows[0].seq, last_seq=rows[-1].seq)
