"""Migrate and make the least-privilege role in one Django start, then record the stamp (issue 42).

scripts/scale-out ran `manage.py migrate` and then `manage.py create_app_role`: two Django starts in a row, each a
minute or more on a busy host. This runs both in one process (migrate without its system checks: the set's programs
meet any configuration error themselves) and records compactweb.set_database's stamp, so the next launcher skips
both when nothing changed. Its standard output is only the DATABASE_URL the set runs with (migrate's progress goes
to standard error), so the launcher reads it without showing it.

    DATABASE_URL=postgres://owner@db/compactweb manage.py prepare_database --role compactweb_app \\
        --password-file var/scale-out/app-role.password --stamp-file var/scale-out/database.stamp
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand

from compactweb import set_database


class Command(BaseCommand):
    help = "Migrate, create or update the app role, and record that the database is prepared (scripts/scale-out)."

    def add_arguments(self, parser):
        parser.add_argument("--role", default="", help="The app role; empty to run the set as the owner.")
        parser.add_argument("--password-file", type=Path, help="The role's password file (create_app_role).")
        parser.add_argument("--stamp-file", type=Path, required=True)

    def handle(self, *args, role: str, password_file: Path | None, stamp_file: Path, **options):
        call_command("migrate", interactive=False, skip_checks=True, verbosity=options["verbosity"],
                     stdout=self.stderr._out, stderr=self.stderr._out)
        owner_url = os.environ.get("DATABASE_URL", "")
        url = owner_url
        if role:
            out = io.StringIO()
            call_command("create_app_role", role=role, password_file=password_file, print_url=True, stdout=out)
            url = out.getvalue().strip().splitlines()[-1]
        set_database.record(stamp_file, owner_url, role)
        self.stdout.write(url)
