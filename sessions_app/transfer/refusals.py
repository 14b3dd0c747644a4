"""What an import or a replay answers when it cannot run as asked (nothing was stored)."""

from __future__ import annotations


class TransferRefused(Exception):
    """An import or replay that cannot run as asked; nothing was stored. `status` is the HTTP status to answer."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        if status:
            self.status = status
        if code:
            self.code = code


class AlreadyImported(TransferRefused):
    status = 409
    code = "already_imported"

    def __init__(self, *, thread_id: str, session_id: int) -> None:
        self.session_id = session_id
        super().__init__(f"thread {thread_id} is already imported as session {session_id}")
