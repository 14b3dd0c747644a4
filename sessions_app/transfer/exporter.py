"""Codex rollout export (spec §15): a session's rollout as Codex rollout JSON Lines. compactweb-only lines
(rollback, redo, window_opened) travel as a `compacted` line plus an inert `compactweb_line` event
(sessions_app.codex_rollout.export), which the importer turns back into the original line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sessions_app.codex_rollout import export_lines
from sessions_app.models import (
    RolloutLine,
    Session,
)
from sessions_app.rollout import projection as p
from sessions_app.rollout.selectors import rollout_line_dicts
from sessions_app.transfer import codex_sources


def export_filename(session: Session) -> str:
    """Codex's file name pattern: rollout-<YYYY-MM-DDTHH-MM-SS>-<thread id>.jsonl (spec §15). An imported or
    followed session keeps its file's name; otherwise the time is the session's start (its session_meta)."""
    return codex_sources.export_filename(session=session)


def _session_meta(session: Session) -> dict[str, Any]:
    first = RolloutLine.objects.filter(session=session, kind=p.SESSION_META).order_by("seq").first()
    meta = dict(first.payload) if first is not None else {}
    return {
        **{k: meta[k] for k in ("cwd", "cli_version", "source", "model_provider") if meta.get(k) is not None},
        "id": str(session.thread_id),
        "timestamp": meta.get("timestamp") or (first.timestamp if first is not None else session.created_at),
        "base_instructions": meta.get("base_instructions") or {"text": session.base_instructions},
    }


def export_rollout(*, session: Session, chunk_size: int = 1000) -> Iterator[str]:
    """The session's rollout as Codex rollout JSON Lines, session_meta first, read from the database in chunks
    (spec §15). An imported or followed session gives back its file's lines exactly as they came in, then what
    compactweb added after (sessions_app.transfer.codex_sources). Raises RolloutExportError for a line Codex's format
    cannot hold."""
    if codex_sources.has_source(session=session):
        return codex_sources.export_with_source(session=session, chunk_size=chunk_size)
    return export_lines(rollout_line_dicts(session_id=session.pk, chunk_size=chunk_size), session_meta=_session_meta(session))
