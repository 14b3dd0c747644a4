"""Database triggers that make the rollout table append-only even for raw SQL (design: nothing is ever deleted).

The ORM refuses updates and deletes in `RolloutLine`'s manager and model; these triggers refuse them in the
database itself, for SQLite and PostgreSQL. UPDATE is refused always. DELETE (and TRUNCATE on PostgreSQL) is
refused unless a purge of the whole database was explicitly allowed on that connection, which only the test
runner's database reset does (`test_database_reset_allowed`); nothing in the application allows it.

On SQLite the DELETE trigger calls `compactweb_rollout_purge_allowed()`, a function this module registers on every
Django connection. A connection that does not know the function (the sqlite3 shell, another program) fails the
DELETE with "no such function", so the guard fails closed.

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

_state = threading.local()

SQLITE_INSTALL = [
    f"DROP TRIGGER IF EXISTS {TABLE}_no_update",
    f"DROP TRIGGER IF EXISTS {TABLE}_no_delete",
    f"""CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE}
        BEGIN SELECT RAISE(ABORT, 'rollout lines are append-only: UPDATE refused'); END""",
    f"""CREATE TRIGGER {TABLE}_no_delete BEFORE DELETE ON {TABLE}
        WHEN {SQLITE_FUNCTION}() = 0
        BEGIN SELECT RAISE(ABORT, 'rollout lines are append-only: DELETE refused'); END""",
]
SQLITE_REMOVE = [f"DROP TRIGGER IF EXISTS {TABLE}_no_update", f"DROP TRIGGER IF EXISTS {TABLE}_no_delete"]

POSTGRES_INSTALL = [
    f"""CREATE OR REPLACE FUNCTION {TABLE}_append_only() RETURNS trigger AS $$
    BEGIN
        IF TG_OP <> 'UPDATE' AND current_setting('{PURGE_SETTING}', true) = 'on' THEN
            RETURN OLD;
        END IF;
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


def remove_triggers(apps, schema_editor) -> None:
    for sql in _statements(schema_editor.connection.vendor, False):
        schema_editor.execute(sql, params=None)


def _purge_allowed() -> int:
    return 1 if getattr(_state, "purge", 0) else 0


def register_sqlite_function(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function(SQLITE_FUNCTION, 0, _purge_allowed)


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
