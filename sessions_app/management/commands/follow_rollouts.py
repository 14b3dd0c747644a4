"""Follow a Codex sessions folder live: `manage.py follow_rollouts ~/.codex/sessions` (issue 13, item 4).

New rollout files are imported as followed (read-only) sessions and the lines Codex appends are added as they
are written. Restart-safe: it resumes from the offsets stored with the lines. `--once` syncs every file once
and exits (a cron job, or a test).
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from compaction_app.models import CompactionPolicy, Provider
from sessions_app.management.lookups import row_by_id_or_name
from sessions_app.transfer.follow import Follower, outside_refusal, scan_folder, sync_folder


class Command(BaseCommand):
    help = ("Follow a Codex sessions folder ($CODEX_HOME/sessions) or a Claude Code projects folder "
            "(~/.claude/projects): import new files, append new lines live.")
    # As import_rollouts: the system checks' URLconfs and views would stay resident in a long-running follower.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("folder", help="The Codex sessions folder (its YYYY/MM/DD/rollout-*.jsonl tree) or Claude "
                                           "Code's projects folder (<project>/<session id>.jsonl).")
        parser.add_argument("--provider", help="Provider id or name for new sessions (default: the first).")
        parser.add_argument("--policy", help="Policy id or name for new sessions (default: the first).")
        parser.add_argument("--once", action="store_true", help="Sync every file once and exit.")
        parser.add_argument("--rescan", type=float, default=5.0,
                            help="Seconds between full rescans besides the file events (default 5).")
        parser.add_argument("--to", metavar="URL",
                            help="Ship the folder to the compactweb server at URL (its JSON API) instead of a local "
                                 "database.")
        parser.add_argument("--token", help="With --to: an operator's API token on that server "
                                            "(default: $COMPACTWEB_SHIP_TOKEN).")
        parser.add_argument("--name", default="", help="With --to: this machine's name in the files' keys "
                                                       "(default: the host name).")

    def handle(self, *args, **options):
        folder, once, rescan = options["folder"], options["once"], options["rescan"]
        root = Path(folder).expanduser()
        if once and not root.is_dir():
            raise CommandError(f"{folder}: no such folder")
        if options["to"]:
            token = options["token"] or os.environ.get("COMPACTWEB_SHIP_TOKEN", "")
            return self._ship(root, options["to"], token, options["name"], once, rescan)
        provider_row = row_by_id_or_name(Provider, options["provider"])
        policy_row = row_by_id_or_name(CompactionPolicy, options["policy"])
        if once:
            for result in sync_folder(root=root, provider=provider_row, policy=policy_row):
                self._report(result)
            return
        follower = Follower(root, provider=provider_row, policy=policy_row, rescan_seconds=rescan)
        self.stdout.write(f"following {root} (Ctrl-C to stop)")
        try:
            follower.run(on_result=self._report, on_caught_up=self._caught_up)
        except KeyboardInterrupt:
            follower.stop()

    def _ship(self, root: Path, url: str, token: str, name: str, once: bool, rescan: float) -> None:
        from sessions_app.transfer.shipper import Server, Shipper, ShipperRefused, ShipperStopped

        if not token:
            raise CommandError("--to needs an API token: --token KEY or $COMPACTWEB_SHIP_TOKEN")
        shipper = Shipper(root, server=Server(url=url, token=token), name=name)
        try:
            shipper.check()
            if once:
                resolved = root.resolve()
                inside, outside = scan_folder(root, resolved=resolved)
                for path in outside:
                    self._report(outside_refusal(resolved, path))
                for path in inside:
                    self._report(shipper.sync(path=path))
                return
            # Codex rollouts and Claude Code transcripts: the server's import tells the formats apart.
            follower = Follower(root, rescan_seconds=rescan, sync=shipper.sync)
            self.stdout.write(f"shipping {root} to {url} as {shipper.name} (Ctrl-C to stop)")
            self.stdout.flush()
            follower.run(on_result=self._report, on_caught_up=self._caught_up)
        except ShipperRefused as exc:
            raise CommandError(str(exc)) from None
        except (KeyboardInterrupt, ShipperStopped):
            shipper.stop.set()
        finally:
            shipper.close()

    def _caught_up(self, files: int) -> None:
        self.stdout.write(f"caught up with {files} files; watching for changes")
        self.stdout.flush()

    def _report(self, result) -> None:
        if result.action in ("unchanged", "waiting"):
            return
        session = f" session {result.session_id}" if result.session_id else ""
        detail = f": {result.detail}" if result.detail else ""
        self.stdout.write(f"{result.action}{session} {result.path} ({result.lines} lines){detail}", )
        self.stdout.flush()
