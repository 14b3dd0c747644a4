"""Background jobs of the compaction app: a manual compaction queued from the UI (compactweb.background)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.contrib.auth import get_user_model

from sessions_app.locks import LeaseLost, SessionBusy
from sessions_app.models import Session

logger = logging.getLogger(__name__)


@shared_task(name="compaction_app.tasks.run_compaction_task")
def run_compaction_task(
    *, session_id: int, actor_id: int | None = None, strategy: str | None = None, instructions: str = "",
    request_id: str = "",
) -> int | None:
    """Run a manual compaction; returns the Compaction id, or None when it did not install anything.

    Every outcome is already recorded (attempt row, rollout error line, audit entry, live events), so failures are
    logged here, not raised: a retry by the queue would compact twice.
    """
    from compaction_app.services import (
        CompactionFailed,
        CompactionInterrupted,
        CompactionRefused,
        do_compact_session,
    )

    actor = get_user_model().objects.filter(pk=actor_id).first() if actor_id is not None else None
    try:
        compaction = do_compact_session(
            session_id=session_id, actor=actor, trigger="manual", strategy=strategy, instructions=instructions
        )
    except (SessionBusy, LeaseLost, CompactionRefused, CompactionInterrupted, CompactionFailed,
            Session.DoesNotExist) as exc:
        logger.info("compaction %s of session %s did not install: %s", request_id, session_id, exc)
        return None
    return compaction.pk


@shared_task(name="compaction_app.tasks.send_alert_task")
def send_alert_task(*, payload: dict) -> int:
    """Send one alert to the enabled alert hooks (compaction_app.alerts); returns how many ran."""
    from compaction_app.alerts import send_alert

    return len(send_alert(payload))
