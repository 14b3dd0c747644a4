"""Run the retention policy now (issue 34, docs/retention-policy.md): archive every session that ended more than
N days ago to a gzip-compressed JSON Lines file equal to its export (under COMPACTWEB_ARCHIVE_DIR), then remove it
from the database. `--dry-run` lists what would go and changes nothing.

Runs whether or not the scheduler's retention is enabled (running it from a shell is the operator's decision);
`--days` and `--limit` override the admin's settings for this run. The run is recorded (ArchiveRun) like a
scheduled one. The exit status is non-zero when any session failed (it stays in the database).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from sessions_app.archive.services import COMMAND, do_run_archiver


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = "Archive sessions that ended more than N days ago to .jsonl.gz files and remove them (retention)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="List the sessions that would go; change nothing."
        )
        parser.add_argument(
            "--days",
            type=_positive,
            help="Archive sessions idle this many days or more (default: the retention settings).",
        )
        parser.add_argument(
            "--limit", type=_positive, help="At most this many sessions (default: the settings)."
        )

    def handle(self, *args, dry_run: bool, days: int | None, limit: int | None, **options):
        run = do_run_archiver(trigger=COMMAND, dry_run=dry_run, days=days, limit=limit)
        if dry_run:
            for due in run.detail["due"]:
                self.stdout.write(
                    f"would archive session {due['session']} (idle since {due['last_activity']}): "
                    f"{due['title']}"
                )
            self.stdout.write(
                f"{run.due} session(s) due before {run.cutoff:%Y-%m-%d %H:%M} (dry run, run #{run.pk})"
            )
            return
        for done in run.detail["archived"]:
            self.stdout.write(f"archived session {done['session']} to {done['file']}")
        for failed in run.detail["failed"]:
            self.stderr.write(f"session {failed['session']} stays: {failed['error']}")
        self.stdout.write(f"run #{run.pk}: {run.archived} archived, {run.failed} failed, of {run.due} due")
        if run.failed:
            raise CommandError(f"{run.failed} session(s) could not be archived (they stay in the database)")
