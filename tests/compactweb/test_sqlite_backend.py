"""The SQLite backend (compactweb.db_backends.sqlite3): Django's, with each statement's `%s` placeholders rewritten
once per distinct SQL text instead of on every execute."""

import pytest
from django.db import connection
from django.db.backends.sqlite3.base import SQLiteCursorWrapper as DjangoCursor

from compactweb.db_backends.sqlite3 import base

pytestmark = pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite pass runs these")


@pytest.mark.parametrize("query", [
    "SELECT %s",
    "SELECT 'x%%' || %s, %s",
    "UPDATE t SET a = %s WHERE b LIKE '%%a%%' AND c = %s",
])
def test_placeholders_are_rewritten_exactly_as_djangos_cursor_does(query):
    assert base.SQLiteCursorWrapper.convert_query(None, query) == DjangoCursor.convert_query(None, query)


def test_a_statement_is_rewritten_once_and_remembered():
    base._qmark.cache_clear()
    sql = "SELECT %s + %s"
    first = base._qmark(sql)
    again = base._qmark(sql)
    assert first == "SELECT ? + ?" and again is first
    assert base._qmark.cache_info().hits == 1 and base._qmark.cache_info().misses == 1


@pytest.mark.django_db
def test_queries_with_positional_and_named_parameters_run_on_the_projects_cursor():
    assert connection.settings_dict["ENGINE"] == "compactweb.db_backends.sqlite3"
    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, base.SQLiteCursorWrapper)
        cursor.execute("SELECT %s || '%%', %s", ["50", 2])
        assert cursor.fetchone() == ("50%", 2)
        cursor.execute("SELECT %(a)s + %(b)s", {"a": 1, "b": 2})
        assert cursor.fetchone() == (3,)
        cursor.execute("CREATE TEMP TABLE backend_probe (a integer)")
        cursor.executemany("INSERT INTO backend_probe (a) VALUES (%s)", [[1], [2]])
        cursor.execute("SELECT sum(a) FROM backend_probe")
        assert cursor.fetchone() == (3,)
