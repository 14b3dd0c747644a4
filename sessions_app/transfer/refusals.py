"""What an import or a replay answers when it cannot run as asked (nothing was stored)."""

from __future__ import annotations

from compactweb.domain_errors import Conflict, Invalid


class TransferRefused(Invalid):
    """An import or replay that cannot run as asked; nothing was stored."""


class InvalidRollout(TransferRefused):
    """A rollout file the importer refuses (codex_rollout.RolloutImportError): its bad lines go in the answer."""

    code = "invalid_rollout"

    def __init__(self, exc) -> None:
        super().__init__(str(exc), lines=[{"line": no, "message": msg} for no, msg in exc.errors])
        self.errors = exc.errors


class OffsetMismatch(Conflict, TransferRefused):
    """A shipped batch that does not start where the server's copy of the file ends."""

    code = "offset_mismatch"


class AlreadyImported(Conflict, TransferRefused):
    code = "already_imported"

    def __init__(self, *, thread_id: str, session_id: int) -> None:
        self.session_id = session_id
        super().__init__(f"thread {thread_id} is already imported as session {session_id}")
