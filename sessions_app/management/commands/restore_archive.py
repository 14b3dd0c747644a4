"""Restore an archived session (issue 34, docs/retention-policy.md): check its file against the archive record's
SHA-256, then import it as a session again through the ordinary importer (its thread id, provider and policy kept),
which exports the same bytes. A session restored already is refused.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from compactweb.domain_errors import DomainError
from sessions_app.archive.services import do_restore_archive
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.models import SessionArchive


class Command(BaseCommand):
    help = "Import an archived session back (by archive id, or --session with the archived session's old id)."

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("archive", nargs="?", type=int, help="The archive record's id.")
        target.add_argument("--session", type=int, help="The archived session's id (as it was).")

    def handle(self, *args, archive: int | None, session: int | None, **options):
        if session is not None:
            archive = SessionArchive.objects.filter(session_id=session).values_list("pk", flat=True).first()
            if archive is None:
                raise CommandError(f"session {session} was not archived")
        try:
            result = do_restore_archive(archive_id=archive)
        except (DomainError, RolloutImportError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"restored archive {archive} as session {result.session.pk} "
            f"({result.lines_imported} rollout lines)"
        )
