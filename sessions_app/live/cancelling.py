"""Ending a channel-layer receive for sure: one cancellation can be lost inside redis-py (it turns it into a
connection error and retries the blocking read), and the receive then polls a dead channel for ever, which also
keeps a closing event loop (a server's shutdown, a test's teardown) waiting. Used by the consumers' receives and the
fleet hub's (sessions_app.live.fleet_hub)."""

from __future__ import annotations

import asyncio
import logging

logger = logging.getLogger(__name__)

CANCEL_ATTEMPTS = 30
CANCEL_INTERVAL_SECONDS = 0.1


async def cancel_until_done(task: asyncio.Future) -> None:
    """Cancel `task` again and again (3 s at most) until it ends."""
    for _ in range(CANCEL_ATTEMPTS):
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=CANCEL_INTERVAL_SECONDS)
        if done:
            if not task.cancelled():
                task.exception()  # retrieved: a receive that failed while being cancelled is not an error to log
            return
    logger.warning("a channel-layer receive did not end after %s cancellations", CANCEL_ATTEMPTS)
