"""What sessions_app offers the gateway: the one module gateway_app imports from it.

The gateway records what its clients send as sessions, rollout lines and compactions, and runs compactions through
the same service as any session. It reaches sessions_app only through the names below, so a change inside a room of
sessions_app (rollout, compactions, transfer, codex_rollout) shows here first, and an import-linter contract
("The gateway reaches sessions_app only through its surface", pyproject.toml) keeps it so.
"""

from sessions_app.codex_rollout.labels import LOCAL, REMOTE_V1, REMOTE_V2, Labels
from sessions_app.compactions.label_lines import labels_line
from sessions_app.compactions.retention import session_pins
from sessions_app.compactions.services import (
    SHORT_OF_TARGET_KIND,
    CompactionAsk,
    CompactionFailed,
    CompactionRefused,
    acompact_session,
)
from sessions_app.compactions.settings_builder import compaction_settings, provider_config
from sessions_app.fleet.scheduler import housekeeping_done
from sessions_app.models import LiveItem, RolloutLine, Session
from sessions_app.rollout import projection
from sessions_app.rollout.events import (
    GATEWAY_NOTICE,
    GATEWAY_REQUESTS,
    apublish_transient,
    publish_transient,
)
from sessions_app.rollout.services import (
    ClientOrigin,
    NewLine,
    append_rollout_lines,
    counter_for,
    do_create_session,
    usage_line,
)
from sessions_app.rollout.signals import rollout_appended
from sessions_app.rollout.validation import ItemValidationError, validate_item
from sessions_app.transfer import live_alerts
from sessions_app.transfer.importer import create_compactions

__all__ = [
    "GATEWAY_NOTICE",
    "GATEWAY_REQUESTS",
    "LOCAL",
    "REMOTE_V1",
    "REMOTE_V2",
    "SHORT_OF_TARGET_KIND",
    "ClientOrigin",
    "CompactionAsk",
    "CompactionFailed",
    "CompactionRefused",
    "ItemValidationError",
    "Labels",
    "LiveItem",
    "NewLine",
    "RolloutLine",
    "Session",
    "acompact_session",
    "append_rollout_lines",
    "apublish_transient",
    "compaction_settings",
    "counter_for",
    "create_compactions",
    "do_create_session",
    "housekeeping_done",
    "live_alerts",
    "projection",
    "provider_config",
    "publish_transient",
    "rollout_appended",
    "session_pins",
    "usage_line",
    "labels_line",
    "validate_item",
]
