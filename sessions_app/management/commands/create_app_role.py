"""Create (or update) the least-privilege PostgreSQL role the application runs as (issue 14).

Run it as the database owner, after `migrate` (and again after every later migrate, which may add tables):

    DATABASE_URL=postgres://owner@db/compactweb manage.py create_app_role --role compactweb_app \\
        --password-file var/app-role.password --print-url

The role may log in and read and write every table the application uses, except the rollout table
(`sessions_app_rolloutline`) and the archive records (`sessions_app_sessionarchive`), where it may only SELECT and
INSERT: no UPDATE, DELETE or TRUNCATE, and, not being the owner, it cannot drop the table, disable its append-only
triggers or create tables. It may EXECUTE `compactweb_delete_archived_rollout`, which removes the rollout of one
session whose archive record counts all its lines (retention, docs/retention-policy.md), and nothing else. Migrations keep running as
the owner. `--print-sql` shows the statements without running them.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from psycopg import sql

from compactweb.set_database import app_database_url
from sessions_app.rollout_guard import ARCHIVE_TABLE, DELETE_FUNCTION
from sessions_app.rollout_guard import TABLE as ROLLOUT_TABLE

# The rollout, and the records of archived sessions (issue 34): what retention removed stays on record, and the
# role cannot delete a record to hide a removal or forge one away.
APPEND_ONLY_TABLES = (ROLLOUT_TABLE, ARCHIVE_TABLE)


def app_role_statements(*, role: str, password: str | None, database: str, schema: str = "public") -> list:
    """The SQL that makes `role` the application's least-privilege login role (idempotent)."""
    r, s, db = sql.Identifier(role), sql.Identifier(schema), sql.Identifier(database)
    create = sql.SQL(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {name}) THEN "
        "CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS; "
        "END IF; END $$"
    ).format(name=sql.Literal(role), role=r)
    statements = [
        create,
        sql.SQL("ALTER ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS").format(r),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, r),
        sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(s, r),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, r),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(s, r),
        sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(s, r),
    ]
    for table in APPEND_ONLY_TABLES:
        statements.append(sql.SQL("REVOKE ALL ON TABLE {}.{} FROM {}").format(s, sql.Identifier(table), r))
        statements.append(sql.SQL("GRANT SELECT, INSERT ON TABLE {}.{} TO {}").format(s, sql.Identifier(table), r))
    # The one way the role removes rollout lines: all of one archived session's (sessions_app.rollout_guard).
    statements.append(sql.SQL("GRANT EXECUTE ON FUNCTION {}.{}(bigint) TO {}").format(
        s, sql.Identifier(DELETE_FUNCTION), r))
    if password is not None:
        statements.append(sql.SQL("ALTER ROLE {} PASSWORD {}").format(r, sql.Literal(password)))
    return statements


def _password(path: Path | None) -> str | None:
    if path is None:
        return os.environ.get("COMPACTWEB_APP_ROLE_PASSWORD") or None
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as handle:
        handle.write(password + "\n")
    return password


class Command(BaseCommand):
    help = "Create or update the least-privilege PostgreSQL role the application runs as (run as the owner)."

    def add_arguments(self, parser):
        parser.add_argument("--role", required=True, help="Name of the login role, e.g. compactweb_app.")
        parser.add_argument("--password-file", type=Path,
                            help="File holding the role's password; created (0600, random) when missing. Without "
                            "it, COMPACTWEB_APP_ROLE_PASSWORD, else the password is left as it is.")
        parser.add_argument("--print-sql", action="store_true", help="Print the statements instead of running them.")
        parser.add_argument("--print-url", action="store_true",
                            help="Print the DATABASE_URL the application should use (from DATABASE_URL).")

    def handle(self, *args, role: str, password_file: Path | None, print_sql: bool, print_url: bool, **options):
        if connection.vendor != "postgresql":
            raise CommandError("create_app_role needs PostgreSQL (DATABASE_URL=postgres://...)")
        password = _password(password_file)
        statements = app_role_statements(role=role, password=password, database=connection.settings_dict["NAME"])
        connection.ensure_connection()
        raw = connection.connection
        if print_sql:
            for statement in statements:
                text = statement.as_string(raw)
                self.stdout.write((text.split(" PASSWORD ")[0] + " PASSWORD '...'" if " PASSWORD " in text
                                   else text) + ";")
            return
        with transaction.atomic(), connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement.as_string(raw))
        if print_url:
            self.stdout.write(app_database_url(os.environ.get("DATABASE_URL", ""), role=role, password=password))
        else:
            self.stdout.write(f"role {role}: SELECT and INSERT only on {', '.join(APPEND_ONLY_TABLES)}; "
                              "read/write on the other tables; no DDL")
