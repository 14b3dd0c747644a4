"""Resume check (spec §8.2): rebuild every session's live state from its rollout alone and compare it with the
cached projection (LiveItem rows and the session's header fields). Reports every difference and exits non-zero
when any session differs; with --rebuild the cache of each differing session is rewritten from the rollout and
checked again (exit zero when every repair verified)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from sessions_app.models import Session
from sessions_app.rollout.services import rebuild_projection, verify_projection


class Command(BaseCommand):
    help = "Verify every session's cached projection against a rebuild from its rollout (--rebuild repairs)."

    def add_arguments(self, parser):
        parser.add_argument("--session", type=int, action="append", help="Only these session ids (repeatable).")
        parser.add_argument("--rebuild", action="store_true", help="Rewrite the cache of sessions that differ.")

    def handle(self, *args, session: list[int] | None, rebuild: bool, **options):
        sessions = Session.objects.order_by("pk")
        if session:
            sessions = sessions.filter(pk__in=session)
        checked = differing = still_wrong = 0
        for row in sessions.iterator(chunk_size=200):
            checked += 1
            problems = verify_projection(session=row)
            if not problems:
                continue
            differing += 1
            self.stdout.write(f"session {row.pk}: {len(problems)} difference(s)")
            for problem in problems:
                self.stdout.write(f"  {problem}")
            if rebuild:
                rebuild_projection(session=row)
                after = verify_projection(session=row)
                if after:
                    still_wrong += 1
                    self.stdout.write(f"  still differs after rebuild: {after[0]}")
                else:
                    self.stdout.write("  rebuilt from the rollout: now equal")
        self.stdout.write(f"{checked} session(s) checked, {differing} differed"
                          + (f", {differing - still_wrong} rebuilt" if rebuild else ""))
        if differing and (not rebuild or still_wrong):
            raise CommandError(f"{still_wrong if rebuild else differing} session(s) differ from their rollout")
