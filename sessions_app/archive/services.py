"""Retention's writes (issue 34, docs/retention-policy.md): archive an ended session to a file equal to its export
and remove its rows, run the policy over every due session, and restore an archive by importing it.

Never lose data: a session's rows are removed only in the transaction that records its archive, after the file
was written, synced, read back and hashed (sessions_app.archive.files), and only if the session did not change
since its export was read (same last seq and last change, still due, under its row lock). A failure at any step
leaves the session as it was and removes the file this attempt wrote (unless its record committed after all).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from compaction_app import audit, records
from compaction_app.models import Alert, AuditEntry, CompactionPolicy, Provider, RetentionSettings
from compactweb.domain_errors import Conflict, NotFound
from sessions_app import rollout_guard
from sessions_app.archive import files, selectors
from sessions_app.codex_rollout.parse import iter_lines
from sessions_app.models import (
    ArchiveRun,
    CodexSource,
    CodexSourceLine,
    ContextWindow,
    RolloutLine,
    Session,
    SessionArchive,
    SimulatorRun,
)
from sessions_app.transfer.exporter import export_filename, export_rollout
from sessions_app.transfer.importer import ImportResult, do_import_rollout
from sessions_app.transfer.refusals import AlreadyImported

logger = logging.getLogger(__name__)

SCHEDULER = "scheduler"
COMMAND = "command"
MAX_REASON = 300


class SessionChanged(Conflict):
    """The session changed (or stopped being due) while its archive was written: it stays, the file is removed."""

    code = "session_changed"


def _remove_session_rows(*, session_id: int, record: SessionArchive) -> int:
    """Everything of one session, inside the archiving transaction, the rollout first (its guard checks the
    record just written). Audit entries are kept, detached (compaction_app.audit.detach_session); the session's
    share of the all-time analytics is kept with the record (compaction_app.records.delete_session_records).
    Returns the number of rollout lines removed."""
    removed = rollout_guard.delete_archived_rollout(connection=connection, session_id=session_id)
    audit.detach_session(session_id=session_id)
    Alert.objects.filter(session_id=session_id).delete()
    records.delete_session_records(session_id=session_id, archive=record)
    CodexSourceLine.objects.filter(source__session_id=session_id).delete()
    CodexSource.objects.filter(session_id=session_id).delete()
    ContextWindow.objects.filter(session_id=session_id).delete()
    SimulatorRun.objects.filter(session_id=session_id).delete()
    # Live items, staged lines, alert state and silences go with the row (CASCADE); jobs keep their outcome.
    Session.objects.filter(pk=session_id).delete()
    return removed


def archive_session(
    *,
    session_id: int,
    cutoff: datetime,
    now: datetime,
    archived_by: str,
    run: ArchiveRun | None = None,
    directory: Path | None = None,
) -> SessionArchive:
    """Archive one due session and remove it (see the module docstring). Raises the exporter's, the file
    writer's or the database's error, or SessionChanged, with the session left as it was."""
    directory = directory or selectors.archive_dir()
    session = Session.objects.get(pk=session_id)
    snapshot = (session.last_seq, session.updated_at)
    rollout_lines = RolloutLine.objects.filter(session_id=session_id).count()
    export_name = export_filename(session)
    relative = files.unique_name(folder=f"{session.created_at:%Y/%m/%d}", export_name=export_name)
    written = files.write_archive(
        directory=directory, relative=relative, lines=export_rollout(session=session)
    )
    try:
        with transaction.atomic():
            locked = Session.objects.select_for_update().filter(pk=session_id).first()
            if (
                locked is None
                or (locked.last_seq, locked.updated_at) != snapshot
                or not selectors.is_due(session_id=session_id, cutoff=cutoff, now=now)
            ):
                raise SessionChanged(f"session {session_id} changed while it was archived; it stays")
            record = SessionArchive.objects.create(
                session_id=session_id,
                thread_id=session.thread_id,
                title=session.title,
                source=session.source,
                provider_id=session.provider_id,
                policy_id=session.policy_id,
                session_created_at=session.created_at,
                last_activity_at=session.updated_at,
                file_name=written.relative,
                export_name=export_name,
                sha256=written.sha256,
                file_lines=written.lines,
                export_bytes=written.export_bytes,
                compressed_bytes=written.compressed_bytes,
                rollout_lines=rollout_lines,
                last_seq=session.last_seq,
                archived_at=now,
                archived_by=archived_by[:150],
                run=run,
            )
            _remove_session_rows(session_id=session_id, record=record)
            audit.record_audit(
                action=AuditEntry.Action.ARCHIVE,
                reason=f"archived session #{session_id} ({session.title})",
                detail={
                    "session_id": session_id,
                    "thread_id": str(session.thread_id),
                    "archive": record.pk,
                    "file": written.relative,
                    "sha256": written.sha256,
                    "by": archived_by,
                },
            )
    except BaseException:
        # Keep the file if its record committed after all (a COMMIT that failed late); else it is this
        # attempt's own unreferenced copy of a session that is still in the database.
        try:
            kept = SessionArchive.objects.filter(file_name=written.relative).exists()
        except Exception:
            kept = True  # the database cannot say: keep the file, an extra copy loses nothing
        if not kept:
            files.remove(directory=directory, relative=written.relative)
        raise
    return record


@dataclass(frozen=True)
class Policy:
    days: int
    limit: int


def policy_from_settings(*, days: int | None = None, limit: int | None = None) -> Policy:
    row = RetentionSettings.current()
    return Policy(
        days=days if days is not None else row.archive_after_days,
        limit=limit if limit is not None else row.max_sessions_per_run,
    )


def sweep_unrecorded(*, directory: Path | None = None) -> list[str]:
    """Remove the files an interrupted run left (issue 42): written, or half-written, with no SessionArchive
    record, older than files.UNRECORDED_GRACE_SECONDS. Their sessions are still in the database (a session is
    removed only in the transaction that records its file), so nothing is lost. Returns their relative names."""
    directory = directory or selectors.archive_dir()
    recorded = set(SessionArchive.objects.values_list("file_name", flat=True))
    swept = files.unrecorded_files(directory=directory, recorded=recorded, now=time.time())
    for relative in swept:
        files.remove(directory=directory, relative=relative)
        logger.warning("removed %s: an interrupted archiver run wrote it and recorded nothing", relative)
    return swept


def do_run_archiver(
    *,
    trigger: str,
    now: datetime | None = None,
    dry_run: bool = False,
    days: int | None = None,
    limit: int | None = None,
    directory: Path | None = None,
) -> ArchiveRun:
    """One run of the retention policy: every due session (at most the policy's limit), the longest idle first,
    each archived and removed on its own (one failure does not stop the others). `days` and `limit` override the
    admin's settings (the command's options); `now` is the clock (the bench advances it). The ArchiveRun row
    records what was due, archived and failed."""
    simulated = now is not None
    now = now or timezone.now()
    swept = [] if dry_run else sweep_unrecorded(directory=directory)
    policy = policy_from_settings(days=days, limit=limit)
    cutoff = now - timedelta(days=policy.days)
    due = selectors.due_session_ids(cutoff=cutoff, now=now, limit=policy.limit)
    run = ArchiveRun.objects.create(
        started_at=now, trigger=trigger[:32], dry_run=dry_run, cutoff=cutoff, due=len(due)
    )
    if dry_run:
        rows = (
            Session.objects.filter(pk__in=due)
            .order_by("updated_at", "pk")
            .values("pk", "title", "updated_at")
        )
        run.detail = {
            "due": [
                {"session": r["pk"], "title": r["title"], "last_activity": r["updated_at"].isoformat()}
                for r in rows
            ]
        }
    else:
        archived, failures = [], []
        for session_id in due:
            try:
                record = archive_session(
                    session_id=session_id,
                    cutoff=cutoff,
                    now=now,
                    archived_by=trigger,
                    run=run,
                    directory=directory,
                )
            except Exception as exc:
                logger.warning("could not archive session %s: %s", session_id, exc)
                failures.append({"session": session_id, "error": f"{type(exc).__name__}: {exc}"[:MAX_REASON]})
            else:
                archived.append({"session": session_id, "archive": record.pk, "file": record.file_name})
        run.archived, run.failed = len(archived), len(failures)
        run.detail = {"archived": archived, "failed": failures, **({"swept": swept} if swept else {})}
    run.finished_at = now if simulated else timezone.now()
    run.save(update_fields=["archived", "failed", "detail", "finished_at"])
    return run


def do_restore_archive(*, archive_id: int, actor=None) -> ImportResult:
    """Import an archive file back as a session (the importer keeps its lines, so the restored session exports
    the same bytes). Its original thread id is kept, so a session restored already is refused (AlreadyImported);
    its title, provider and policy are the original ones (when they still exist). The record stays: it describes
    the file. The session's compactions then move from the archive's analytics share back to the re-imported
    rows (compaction_app.records.restore_archived_compactions), so all-time analytics count them once; when the
    thread is in the database already (restored before, or the file imported by hand) the share moves to that
    session if it has not yet, and the restore is refused."""
    record = SessionArchive.objects.filter(pk=archive_id).first()
    if record is None:
        raise NotFound(f"no archive {archive_id}", code="no_such_archive")
    chunks = files.verified_chunks(
        directory=selectors.archive_dir(), relative=record.file_name, sha256=record.sha256
    )
    try:
        lines = iter_lines(
            chunks, max_line_bytes=settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES, source_name=record.export_name
        )
        result = do_import_rollout(
            lines=lines,
            source_name=record.export_name,
            title=record.title,
            actor=actor,
            provider=Provider.objects.filter(pk=record.provider_id).first(),
            policy=CompactionPolicy.objects.filter(pk=record.policy_id).first(),
        )
    except files.ArchiveFileBad as exc:
        raise Conflict(str(exc), code="archive_not_restorable") from None
    except AlreadyImported as exc:
        # The session with this thread id holds the file's compactions: a restore that died before moving the
        # share, or the file imported by hand. Move the share now (once: a moved share is left alone), so they
        # count once, and still refuse.
        with transaction.atomic():
            records.restore_archived_compactions(archive_id=record.pk, session_id=exc.session_id)
        raise
    with transaction.atomic():
        records.restore_archived_compactions(archive_id=record.pk, session_id=result.session.pk)
    return result
