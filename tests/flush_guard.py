"""Test-only: Django's flush between transactional tests empties every table, which the append-only rollout
triggers refuse unless the reset is allowed explicitly (sessions_app.rollout_guard.test_database_reset_allowed).
On PostgreSQL the flush also deletes the rows instead of truncating the tables (see `delete_rows_flush`).
This patch lives with the tests, not in production code."""

from __future__ import annotations

import functools
from unittest import mock

from django.db.backends.postgresql.operations import DatabaseOperations
from django.test import TransactionTestCase

from sessions_app.rollout_guard import test_database_reset_allowed

_truncate_flush = DatabaseOperations.sql_flush


def delete_rows_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    """PostgreSQL's flush as one DELETE per table instead of Django's one TRUNCATE of them all.

    Same end state for the flush between transactional tests: every table empty, sequences untouched (Django's
    flush resets them only with reset_sequences, which keeps the TRUNCATE here), post_migrate then recreating the
    content types, permissions and role groups. TRUNCATE gives each of the ~56 tables a new file: ~1-2 s per flush
    on the CI machine, paid by each of the ~330 transactional tests of the services pass; deleting a test's few rows
    takes ~30 ms (issue 43, docs/benchmarks.md "CI wall time"). The foreign keys Django creates are deferred to the
    commit (the flush runs in one transaction), so the order of the tables does not matter."""
    if reset_sequences or allow_cascade or not tables:
        return _truncate_flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]


def wrap_test_flush() -> None:
    """Patch Django's TransactionTestCase teardown so its flush runs inside `test_database_reset_allowed`, and
    deletes rows rather than truncating tables on PostgreSQL."""
    original = TransactionTestCase._fixture_teardown
    if getattr(original, "_compactweb_wrapped", False):
        return

    @functools.wraps(original)
    def _fixture_teardown(self):
        with test_database_reset_allowed(), mock.patch.object(DatabaseOperations, "sql_flush", delete_rows_flush):
            return original(self)

    _fixture_teardown._compactweb_wrapped = True
    TransactionTestCase._fixture_teardown = _fixture_teardown
