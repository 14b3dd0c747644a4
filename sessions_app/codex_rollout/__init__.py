"""Codex rollout import/export, resume reconstruction and thread rollback, in plain Python (spec §8.2, §8.3,
§15, §1.5). Nothing here imports Django."""

from sessions_app.codex_rollout.convert import ROLLBACK, ROLLBACK_SOURCE, ImportedLine, to_compactweb_lines
from sessions_app.codex_rollout.export import RolloutExportError, export_lines, format_timestamp
from sessions_app.codex_rollout.parse import ParsedRollout, RolloutImportError, RolloutLine, parse_rollout
from sessions_app.codex_rollout.reconstruct import Reconstruction, reconstruct_history
from sessions_app.codex_rollout.turn_rollback import (
    ThreadRollback,
    ThreadRollbackError,
    drop_last_user_turns,
    plan_thread_rollback,
    rollback_turns,
)

__all__ = [
    "ROLLBACK",
    "ROLLBACK_SOURCE",
    "ImportedLine",
    "ParsedRollout",
    "Reconstruction",
    "RolloutExportError",
    "RolloutImportError",
    "RolloutLine",
    "ThreadRollback",
    "ThreadRollbackError",
    "drop_last_user_turns",
    "export_lines",
    "format_timestamp",
    "parse_rollout",
    "plan_thread_rollback",
    "reconstruct_history",
    "rollback_turns",
    "to_compactweb_lines",
]
