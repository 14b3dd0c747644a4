"""Example compaction hooks: what `setup_demo` seeds (disabled) so an admin sees what a hook can be.

A callable hook gets the hook payload (spec §7: event, trigger, model, ...) as a dict and may answer
`{"continue": false, "stopReason": "..."}` to stop the compaction; anything else lets it go on.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def log_compaction(payload: dict[str, Any]) -> None:
    """Log one line per compaction hook event and let the compaction go on."""
    logger.info("compaction hook %s: trigger=%s model=%s", payload.get("hook_event_name") or payload.get("event"),
                payload.get("trigger"), payload.get("model"))
