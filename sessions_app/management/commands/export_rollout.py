"""Write a session's rollout as a Codex rollout JSON Lines file (spec §15)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions_app.codex_rollout import RolloutExportError
from sessions_app.models import Session
from sessions_app.transfer.exporter import export_filename, export_rollout


class Command(BaseCommand):
    help = "Export a session as a Codex rollout .jsonl (to stdout, a file, or a sessions/YYYY/MM/DD folder tree)."

    def add_arguments(self, parser):
        parser.add_argument("session", type=int, help="Session id.")
        target = parser.add_mutually_exclusive_group()
        target.add_argument("-o", "--output", help="File to write (default: stdout).")
        target.add_argument("--into", help="A sessions folder: writes YYYY/MM/DD/rollout-<time>-<thread>.jsonl under it.")

    def handle(self, *args, session: int, output: str | None, into: str | None, **options):
        try:
            row = Session.objects.get(pk=session)
        except Session.DoesNotExist:
            raise CommandError(f"no session {session}") from None
        if into:
            path = Path(into) / f"{row.created_at:%Y}" / f"{row.created_at:%m}" / f"{row.created_at:%d}"
            path.mkdir(parents=True, exist_ok=True)
            output = str(path / export_filename(row))
        try:
            if output:
                with open(output, "w", encoding="utf-8", newline="\n") as handle:
                    count = sum(handle.write(line) > 0 for line in export_rollout(session=row))
                self.stderr.write(f"wrote {count} lines to {output}")
            else:
                for line in export_rollout(session=row):
                    self.stdout.write(line, ending="")
        except RolloutExportError as exc:
            raise CommandError(str(exc)) from None
