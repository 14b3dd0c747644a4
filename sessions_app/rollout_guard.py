"""Database triggers that make the rollout table append-only even for raw SQL (design: nothing is ever deleted).

The ORM refuses updates and deletes in `RolloutLine`'s manager and model; these triggers refuse them in the
database itself, for SQLite and PostgreSQL. UPDATE is refused always. DELETE (and TRUNCATE on PostgreSQL) is
refused unless a purge of the whole database was explicitly allowed on that connection, which only the test
runner's database reset does (`test_database_reset_allowed`); nothing in the application allows it.

On SQLite the DELETE trigger calls `compactweb_rollout_purge_allowed()`, a function this module registers on every
Django connection. A connection that does not know the function (the sqlite3 shell, another program) fails the
DELETE with "no such function", so the guard fails closed.

One more DELETE is allowed, and only through `delete_archived_rollout` (issue 34, docs/retention-policy.md): the
retention archiver removes the whole rollout of a session once that session's archive record (SessionArchive, the
proof that a verified file equal to its export was written) is in the database. The triggers let a line go only
when the connection is scoped to that one session (SQLite: a per-thread scope this module sets around one
statement; PostgreSQL: a transaction-local setting that `compactweb_delete_archived_rollout`, a SECURITY DEFINER
function owned by the table's owner, sets) and the record exists. The application's PostgreSQL role has no
DELETE on the table and can remove lines only by calling that function, which also checks that the record counts
every line of the session.

Note for future migrations: SQLite rebuilds a table when a column is altered, which drops its triggers. A migration
that alters `sessions_app_rolloutline` must run `install_triggers` again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from django.db import connections
from django.db.backends.signals import connection_created

TABLE = "sessions_app_rolloutline"
PURGE_SETTING = "compactweb.rollout_purge"
SQLITE_FUNCTION = "compactweb_rollout_purge_allowed"
ARCHIVE_TABLE = "sessions_app_sessionarchive"
ARCHIVE_SETTING = "compactweb.rollout_archive_delete"
SQLITE_ARCHIVE_FUNCTION = "compactweb_rollout_archive_scope"
DELETE_FUNCTION = "compactweb_delete_archived_rollout"

_state = threading.local()

SQLITE_ARCHIVE_CLAUSE = f""" AND NOT (
            {SQLITE_ARCHIVE_FUNCTION}() = OLD.session_id
            AND EXISTS (SELECT 1 FROM {ARCHIVE_TABLE} a WHERE a.session_id = OLD.session_id))"""
POSTGRES_ARCHIVE_CLAUSE = f"""
        IF TG_OP = 'DELETE' AND current_setting('{ARCHIVE_SETTING}', true) = OLD.session_id::text
                AND EXISTS (SELECT 1 FROM {ARCHIVE_TABLE} a WHERE a.session_id = OLD.session_id) THEN
            RETURN OLD;
        END IF;"""

SQLITE_INSTALL = [
    f"DROP TRIGGER IF EXISTS {TABLE}_no_update",
    f"DROP TRIGGER IF EXISTS {TABLE}_no_delete",
    f"""CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE}
        BEGIN SELECT RAISE(ABORT, 'rollout lines are append-only: UPDATE refused'); END""",
    f"""CREATE TRIGGER {TABLE}_no_delete BEFORE DELETE ON {TABLE}
        WHEN {SQLITE_FUNCTION}() = 0{SQLITE_ARCHIVE_CLAUSE}
        BEGIN SELECT RAISE(ABORT, 'rollout lines are append-only: DELETE refused'); END""",
]
SQLITE_REMOVE = [f"DROP TRIGGER IF EXISTS {TABLE}_no_update", f"DROP TRIGGER IF EXISTS {TABLE}_no_delete"]

POSTGRES_INSTALL = [
    f"""CREATE OR REPLACE FUNCTION {TABLE}_append_only() RETURNS trigger AS $$
    BEGIN
        IF TG_OP <> 'UPDATE' AND current_setting('{PURGE_SETTING}', true) = 'on' THEN
            RETURN OLD;
        END IF;{POSTGRES_ARCHIVE_CLAUSE}
        RAISE EXCEPTION 'rollout lines are append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation';
    END;
    $$ LANGUAGE plpgsql""",
    f"DROP TRIGGER IF EXISTS {TABLE}_append_only_rows ON {TABLE}",
    f"DROP TRIGGER IF EXISTS {TABLE}_append_only_truncate ON {TABLE}",
    f"""CREATE TRIGGER {TABLE}_append_only_rows BEFORE UPDATE OR DELETE ON {TABLE}
        FOR EACH ROW EXECUTE FUNCTION {TABLE}_append_only()""",
    f"""CREATE TRIGGER {TABLE}_append_only_truncate BEFORE TRUNCATE ON {TABLE}
        FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_append_only()""",
]
POSTGRES_REMOVE = [
    f"DROP TRIGGER IF EXISTS {TABLE}_append_only_rows ON {TABLE}",
    f"DROP TRIGGER IF EXISTS {TABLE}_append_only_truncate ON {TABLE}",
    f"DROP FUNCTION IF EXISTS {TABLE}_append_only()",
]


# The one way the application's role removes rollout lines: all of one archived session's, after checking that
# its archive record counts exactly the lines there are (none appended since the file was written). It runs as
# the table's owner (SECURITY DEFINER, with the search path fixed at creation), sets the trigger's scope for this
# transaction only, and clears it again. Execution is revoked from PUBLIC; create_app_role grants it to the role.
POSTGRES_DELETE_FUNCTION = [
    f"""CREATE OR REPLACE FUNCTION {DELETE_FUNCTION}(archived_session bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
    DECLARE
        recorded_lines bigint;
        recorded_last bigint;
        present_lines bigint;
        present_last bigint;
        removed bigint;
    BEGIN
        SELECT rollout_lines, last_seq INTO recorded_lines, recorded_last
            FROM {ARCHIVE_TABLE} WHERE session_id = archived_session;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'session % has no archive record: its rollout lines stay', archived_session
                USING ERRCODE = 'restrict_violation';
        END IF;
        SELECT count(*), coalesce(max(seq), 0) INTO present_lines, present_last
            FROM {TABLE} WHERE session_id = archived_session;
        IF present_lines <> recorded_lines OR present_last <> recorded_last THEN
            RAISE EXCEPTION 'the archive of session % does not hold all its % rollout lines', archived_session,
                present_lines USING ERRCODE = 'restrict_violation';
        END IF;
        PERFORM set_config('{ARCHIVE_SETTING}', archived_session::text, true);
        DELETE FROM {TABLE} WHERE session_id = archived_session;
        GET DIAGNOSTICS removed = ROW_COUNT;
        PERFORM set_config('{ARCHIVE_SETTING}', '', true);
        RETURN removed;
    END;
    $$""",
    f"REVOKE ALL ON FUNCTION {DELETE_FUNCTION}(bigint) FROM PUBLIC",
]


def install_delete_function(apps, schema_editor) -> None:
    """Migration operation (PostgreSQL): create the archived-session delete function; nothing on SQLite, where
    `delete_archived_rollout` scopes the trigger itself."""
    if schema_editor.connection.vendor == "postgresql":
        for sql in POSTGRES_DELETE_FUNCTION:
            schema_editor.execute(sql, params=None)


def remove_delete_function(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {DELETE_FUNCTION}(bigint)", params=None)


def _statements(vendor: str, install: bool) -> list[str]:
    if vendor == "sqlite":
        return SQLITE_INSTALL if install else SQLITE_REMOVE
    if vendor == "postgresql":
        return POSTGRES_INSTALL if install else POSTGRES_REMOVE
    raise NotImplementedError(f"no append-only triggers for database vendor {vendor!r}")


def install_triggers(apps, schema_editor) -> None:
    """Migration operation: create the append-only triggers for the connection's database vendor."""
    for sql in _statements(schema_editor.connection.vendor, True):
        schema_editor.execute(sql, params=None)


def install_first_triggers(apps, schema_editor) -> None:
    """Migration 0002's operation: the triggers as they were before the archive table existed (SQLite checks a
    trigger's tables whenever a later migration rebuilds a table, so the archive clause waits for 0017)."""
    vendor = schema_editor.connection.vendor
    for sql in _statements(vendor, True):
        if vendor == "sqlite":
            sql = sql.replace(SQLITE_ARCHIVE_CLAUSE, "")
        else:
            sql = sql.replace(POSTGRES_ARCHIVE_CLAUSE, "")
        schema_editor.execute(sql, params=None)


def remove_triggers(apps, schema_editor) -> None:
    for sql in _statements(schema_editor.connection.vendor, False):
        schema_editor.execute(sql, params=None)


def _purge_allowed() -> int:
    return 1 if getattr(_state, "purge", 0) else 0


def _archive_scope() -> int:
    return getattr(_state, "archive_session", -1)


def register_sqlite_function(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function(SQLITE_FUNCTION, 0, _purge_allowed)
        connection.connection.create_function(SQLITE_ARCHIVE_FUNCTION, 0, _archive_scope)


class ArchiveIncomplete(RuntimeError):
    """A session's rollout was not removed: it has no archive record, or lines the record does not count."""


def delete_archived_rollout(*, connection, session_id: int) -> int:
    """Remove every rollout line of one archived session (issue 34); returns how many. The caller holds the
    session's row lock in a transaction that has just inserted its SessionArchive record. Raises ArchiveIncomplete
    (SQLite) or the function's restrict_violation (PostgreSQL) when the record is missing or does not count every
    line, so the lines stay."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {DELETE_FUNCTION}(%s)", [session_id])
            return cursor.fetchone()[0]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT rollout_lines, last_seq FROM {ARCHIVE_TABLE} WHERE session_id = %s", [session_id]
        )
        recorded = cursor.fetchone()
        cursor.execute(
            f"SELECT count(*), coalesce(max(seq), 0) FROM {TABLE} WHERE session_id = %s", [session_id]
        )
        present = cursor.fetchone()
        if recorded is None or tuple(recorded) != tuple(present):
            raise ArchiveIncomplete(
                f"the archive of session {session_id} does not hold all its rollout lines"
            )
        _state.archive_session = session_id
        try:
            cursor.execute(f"DELETE FROM {TABLE} WHERE session_id = %s", [session_id])
            return cursor.rowcount
        finally:
            _state.archive_session = -1


def connect_signals() -> None:
    connection_created.connect(register_sqlite_function, dispatch_uid="compactweb_rollout_guard")


@contextlib.contextmanager
def test_database_reset_allowed() -> Iterator[None]:
    """Let the test runner empty the whole database (Django's flush between transactional tests).

    Only for resetting a test database: application code never calls this.
    """
    _state.purge = getattr(_state, "purge", 0) + 1
    enabled = []
    try:
        for conn in connections.all(initialized_only=True):
            if conn.vendor == "postgresql":
                conn.ensure_connection()
                with conn.cursor() as cursor:
                    cursor.execute(f"SET {PURGE_SETTING} = 'on'")
                enabled.append(conn)
        yield
    finally:
        _state.purge -= 1
        for conn in enabled:
            if conn.connection is not None:
                with conn.cursor() as cursor:
                    cursor.execute(f"RESET {PURGE_SETTING}")
