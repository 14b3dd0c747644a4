"""Django's SQLite backend, with each statement's placeholders rewritten once per distinct SQL, not once per call.

Django writes SQL with `%s` placeholders and its SQLite cursor rewrites them to `?` with a regular expression on
every execute (`SQLiteCursorWrapper.convert_query`). The hot path runs the same few statements thousands of times
(`compactweb.statements`, the append's SQL): the rewrite was 5-8% of an append (issue 16). Here the rewritten
text is remembered by the SQL text it came from, in a bounded cache; the rewrite itself is Django's, unchanged.
Named (`%(name)s`) parameters, which depend on the parameters given, still go through Django's own conversion.

Settings name it as the ENGINE `compactweb.db_backends.sqlite3`; everything else is `django.db.backends.sqlite3`.
"""

from __future__ import annotations

from functools import lru_cache

from django.db.backends.sqlite3 import base

# Enough for every statement the ORM and the hot path build in a long-running process; a query built anew each
# time (an IN list of another length) only takes a slot that the least recently used statement gives up.
CACHED_STATEMENTS = 2048


@lru_cache(maxsize=CACHED_STATEMENTS)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name=None):
        return self.connection.cursor(factory=SQLiteCursorWrapper)
