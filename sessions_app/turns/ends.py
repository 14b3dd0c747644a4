"""Every turn ends: a turn something cut short (a database outage, a deadlock, a killed worker, an exception) gets
its `error` line saying why and its `turn_complete` (status "interrupted") from whoever next holds the session.

The turn loop ends every turn it runs to its end (completed or failed, `turns/loop`). What it cannot end is a turn
whose process, connection or transaction went away between its `turn_started` and its last write: the rollout then
held a turn that never ended, and a reader (Codex's resume, the dashboard, an audit) could not tell it was cut.
`end_open_turn` writes the end, once (under the session's row lock, so two enders write one end), by:

- the turn's own holder when the turn raised (`turns/services`), if the database takes the write and it still
  holds the lease;
- the simulator step once the database is back (`fleet/runtime._resume_after_outage`), for the turn it started,
  while it still holds its lease (a step that never took the lease ends nothing);
- whoever takes over or reaps the lease of a dead holder (`rollout/signals.holder_lost`, connected in apps.py):
  a killed worker's turn is ended by the next taker, in the takeover's transaction.
"""

from __future__ import annotations

import asyncio
import logging

from django.db import transaction

from compactweb import db_outage
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p
from sessions_app.rollout.locks import lock_session
from sessions_app.rollout.services import NewLine, append_rollout_lines
from sessions_app.turns.loop import (
    INTERRUPTED_CODE,
    TURN_COMPLETE,
    TURN_STARTED,
    error_marker,
    turn_complete_marker,
)

logger = logging.getLogger(__name__)

INTERRUPTED = "interrupted"  # the turn_complete status of a turn that did not run to its end


def open_turn(*, session_id: int) -> str | None:
    """The turn id of the session's newest `turn_started` when no `turn_complete` follows it, else None."""
    newest = (
        RolloutLine.objects.filter(session_id=session_id, kind=p.EVENT_MSG,
                                   payload__type__in=[TURN_STARTED, TURN_COMPLETE])
        .order_by("-seq").values_list("payload", flat=True).first()
    )
    if isinstance(newest, dict) and newest.get("type") == TURN_STARTED:
        return str(newest.get("turn_id") or "")
    return None


def end_open_turn(*, session_id: int, why: str, holder: str | None = None,
                  turn_id: str | None = None) -> str | None:
    """End the session's open turn, if it has one, with an `error` line saying `why` and `turn_complete`
    (status "interrupted"); returns its turn id. In the caller's transaction when there is one.

    `holder`: end it only while that lease holder still holds the session; `turn_id`: only when the open turn is
    that one. Both are checked under the session's row lock. A step or turn that ends its own cut turn passes
    both: once its lease was taken over (or reaped), the taker ended that turn, and the open turn, if any, is the
    new holder's, still being written; an interrupted end written into it gave that turn two `turn_complete`
    lines when its writer completed it (issue 42). The takeover and the reaper pass neither: they hold the lease
    themselves, and the turn they end is the dead holder's."""
    with transaction.atomic():
        session = lock_session(session_id=session_id, with_config=True)
        if holder is not None and session.lease_holder != holder:
            return None
        open_id = open_turn(session_id=session_id)
        if open_id is None or (turn_id is not None and open_id != turn_id):
            return None
        turn_id = open_id
        message = f"The turn was interrupted before it ended: {why}"
        ends = [error_marker(turn_id=turn_id, message=message, code=INTERRUPTED_CODE),
                turn_complete_marker(turn_id, INTERRUPTED, "")]
        append_rollout_lines(session=session, lines=[NewLine(m.kind, m.payload) for m in ends])
    logger.warning("turn %s of session %s ended as interrupted: %s", turn_id, session_id, why)
    return turn_id


def why_cut(exc: BaseException) -> str:
    """What cut a turn short, in words for its `error` line (no exception text: it may name server paths)."""
    if db_outage.is_conflict(exc):
        return "a conflicting transaction rolled its write back (deadlock or serialization failure)"
    if db_outage.is_unavailable(exc):
        return "the database became unavailable"
    if isinstance(exc, asyncio.CancelledError):
        return "it was cancelled (its worker stopped)"
    return f"an unexpected error ({type(exc).__name__})"


def end_dead_holders_turn(sender, *, session_id: int, **kwargs) -> None:
    """`holder_lost` receiver: the lease's holder died (its lease expired): end the turn it left open."""
    end_open_turn(session_id=session_id, why="its process stopped holding the session (lease expired)")
