"""Import Codex rollout files, or every `*.jsonl` under folders such as `~/.codex/sessions/` (its
`YYYY/MM/DD/rollout-….jsonl` tree), one session per file (spec §15).

Each file is imported in its own transaction, all or nothing. Bad lines (a truncated last line, garbage, unknown
items, bad timestamps) are skipped or repaired and listed with their numbers; with `--strict` a bad file is reported with its bad lines and the
command goes on with the next one (`--stop-on-error` stops instead); files whose thread is already imported are
reported and skipped. A line longer than COMPACTWEB_MAX_IMPORT_LINE_BYTES refuses its file. The exit status is non-zero when any file failed.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from compaction_app.models import CompactionPolicy, Provider
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.codex_rollout.parse import file_chunks, iter_lines
from sessions_app.management.lookups import row_by_id_or_name
from sessions_app.transfer.importer import do_import_rollout
from sessions_app.transfer.refusals import AlreadyImported, TransferRefused

PATTERNS = ("*.jsonl", "*.ndjson")
IMPORT_SQLITE_CACHE_KIB = 2000  # SQLite's own default


def rollout_files(paths: list[str]) -> list[Path]:
    """The files named, plus every rollout file under the folders named, in path order (so by date in a
    YYYY/MM/DD tree)."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted({f for pattern in PATTERNS for f in path.rglob(pattern) if f.is_file()})
        elif path.is_file():
            found.append(path)
        else:
            raise CommandError(f"{name}: no such file or folder")
    return found


class Command(BaseCommand):
    help = "Import Codex rollout .jsonl files (or folders of them, e.g. a sessions/YYYY/MM/DD tree) as sessions."
    # The system checks load every URLconf, view and serializer, which an import never uses: 23 MB of the
    # process's peak (issue 30). `manage.py check` and the dashboard still run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", help="Rollout files and/or folders to walk.")
        parser.add_argument("--provider", help="Provider id or name (default: the first configured).")
        parser.add_argument("--policy", help="Policy id or name (default: the first configured).")
        parser.add_argument("--stop-on-error", action="store_true", help="Stop at the first file that fails.")
        parser.add_argument("--strict", action="store_true",
                            help="Refuse a file whole when any line is malformed (default: skip and report it).")
        parser.add_argument("--new-thread-id", action="store_true",
                            help="Import threads that were imported before again, under fresh thread ids.")

    def handle(self, *args, paths, provider, policy, stop_on_error, new_thread_id, strict=False, **options):
        if connection.vendor == "sqlite":
            # The dashboard's 16 MB page cache fills up as an import writes, so the command's memory grew with the
            # file (issue 30); an import writes each page once and reads back only the batch it just wrote.
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA cache_size=-{IMPORT_SQLITE_CACHE_KIB}")
        provider_row = row_by_id_or_name(Provider, provider)
        policy_row = row_by_id_or_name(CompactionPolicy, policy)
        files = rollout_files(paths)
        imported = skipped = failed = 0
        for path in files:
            try:
                with path.open("rb") as handle:
                    # Read in pieces, so a line past COMPACTWEB_MAX_IMPORT_LINE_BYTES refuses the file before it
                    # is read whole (issue 27), as the upload and the API do.
                    lines = iter_lines(file_chunks(handle), max_line_bytes=settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES,
                                       source_name=str(path))
                    result = do_import_rollout(
                        lines=lines, source_name=str(path), provider=provider_row, policy=policy_row,
                        new_thread_id=new_thread_id, strict=strict,
                    )
            except AlreadyImported as exc:
                skipped += 1
                self.stdout.write(f"skipped {path}: {exc}")
                continue
            except RolloutImportError as exc:
                failed += 1
                self.stderr.write(f"FAILED {path}: nothing imported; {len(exc.errors)} bad line(s)")
                for line_no, message in exc.errors[:20]:
                    self.stderr.write(f"  line {line_no}: {message}")
            except (TransferRefused, OSError) as exc:
                failed += 1
                self.stderr.write(f"FAILED {path}: {exc}")
            else:
                imported += 1
                extra = f", {result.skipped_count} unknown line(s) skipped" if result.skipped_count else ""
                if result.problems:
                    extra += f", {result.skipped_lines} bad line(s) skipped, {result.repaired_lines} repaired"
                self.stdout.write(
                    f"imported {path} as session {result.session.pk}: {result.lines_imported} lines, "
                    f"{result.compactions} compaction(s){extra}"
                )
                for problem in result.problems[:20]:
                    self.stdout.write(f"  line {problem.line_no}: {problem.action}: {problem.reason}")
                continue
            if stop_on_error:
                break
        self.stdout.write(f"{imported} imported, {skipped} already imported, {failed} failed, of {len(files)} file(s)")
        if failed:
            raise CommandError(f"{failed} file(s) could not be imported")
