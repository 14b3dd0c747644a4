"""Test-only: Django's flush between transactional tests empties every table, which the append-only rollout
triggers refuse unless the reset is allowed explicitly (sessions_app.rollout_guard.test_database_reset_allowed).
This patch lives with the tests, not in production code."""

from __future__ import annotations

import functools

from django.test import TransactionTestCase

from sessions_app.rollout_guard import test_database_reset_allowed


def wrap_test_flush() -> None:
    """Patch Django's TransactionTestCase teardown so its flush runs inside `test_database_reset_allowed`."""
    original = TransactionTestCase._fixture_teardown
    if getattr(original, "_compactweb_wrapped", False):
        return

    @functools.wraps(original)
    def _fixture_teardown(self):
        with test_database_reset_allowed():
            return original(self)

    _fixture_teardown._compactweb_wrapped = True
    TransactionTestCase._fixture_teardown = _fixture_teardown
