"""compactweb.db_outage: which errors mean the database is away, closing only the connections an error broke, and
the write probe that tells a read-only or full database from a healthy one (issue 31)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, OperationalError, connections

from compactweb import db_outage

pytestmark = pytest.mark.django_db


def test_outage_errors_are_told_from_other_database_errors_even_when_wrapped():
    try:
        try:
            raise OperationalError("database or disk is full")
        except OperationalError as exc:
            raise RuntimeError("a step failed") from exc
    except RuntimeError as wrapped:
        assert db_outage.is_unavailable(wrapped)
    assert not db_outage.is_unavailable(IntegrityError("duplicate key"))
    assert not db_outage.is_unavailable(ValueError("a bug"))


@pytest.mark.django_db(transaction=True)  # outside a transaction: one inside is never closed under its owner
def test_drop_broken_connections_closes_only_an_unusable_connection(monkeypatch):
    connection = connections["default"]
    connection.ensure_connection()
    assert db_outage.drop_broken_connections() == 0 and connection.connection is not None
    connection.errors_occurred = True
    assert db_outage.drop_broken_connections() == 0 and connection.errors_occurred is False  # usable: kept
    connection.errors_occurred = True
    monkeypatch.setattr(connection, "is_usable", lambda: False)
    assert db_outage.drop_broken_connections() == 1 and connection.connection is None


def test_the_write_probe_passes_on_a_writable_database():
    db_outage.check_writable()


def test_wait_until_writable_gives_up_at_its_deadline(monkeypatch):
    def refuse():
        raise OperationalError("attempt to write a readonly database")

    ticks = iter(range(100))
    monkeypatch.setattr(db_outage, "check_writable", refuse)
    assert db_outage.wait_until_writable(deadline=3, clock=lambda: next(ticks), sleep=lambda s: None) is False
    monkeypatch.setattr(db_outage, "check_writable", lambda: None)
    assert db_outage.wait_until_writable(deadline=0, clock=lambda: 1, sleep=lambda s: None) is True


def test_the_write_probe_fails_on_a_read_only_sqlite_file(tmp_path):
    import sqlite3

    from django.db.backends.sqlite3.base import DatabaseWrapper

    path = tmp_path / "read-only.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.close()
    # opened read-only (a chmod does not stop root, which these tests may run as)
    settings = {**connections["default"].settings_dict, "ENGINE": "django.db.backends.sqlite3",
                "NAME": f"file:{path}?mode=ro", "OPTIONS": {"uri": True}}
    wrapper = DatabaseWrapper(settings, alias="read-only")
    try:
        wrapper.cursor().execute("SELECT 1")  # reads answer
        with pytest.raises(DatabaseError):
            db_outage.check_writable(connection=wrapper)
    finally:
        wrapper.close()
