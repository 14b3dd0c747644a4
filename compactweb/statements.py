"""Statements written once: the few one-row UPDATEs and SELECTs that every turn and simulator step runs, as SQL
built once per database kind from the models' own fields and run on Django's cursor.

Building such a statement through the ORM (a `filter().update()`, a `get()`) cost several times running it on
SQLite, and a simulator step ran a handful of them (issue 16). The SQL here is the ORM's own vocabulary: column and
table names come from the model's `_meta` and are quoted by the backend; values are adapted by each field's
`get_db_prep_save` (or `get_db_prep_value` in a WHERE, as lookups do) and read back through the converters the ORM
applies (the backend's, then the field's), so JSON, datetimes, UUIDs and booleans come and go exactly as they do
through a queryset. Queries still go through Django's cursor: its error translation, `execute_wrappers` and the
debug query log all see them.

Only what the hot path needs: equality and the four comparisons in a WHERE, `column = column + n`, one row or a
yes/no answer. Anything else belongs to the ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections, router
from django.db.models import Field, Model

# Values every backend takes as they are for these column types (`get_db_prep_save` would only return them again):
# skipping the call for them is most of the cost of adapting a row's values. JSON (but its None), datetimes, UUIDs and
# anything of another type still go through the field. `type(v)`, not isinstance: a bool is not a plain int.
_INTEGER_TYPES = ("AutoField", "BigAutoField", "IntegerField", "BigIntegerField", "PositiveIntegerField",
                  "PositiveBigIntegerField", "SmallIntegerField", "PositiveSmallIntegerField", "ForeignKey",
                  "OneToOneField")
_PLAIN: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(_INTEGER_TYPES, (int, type(None))),
    "CharField": (str, type(None)), "TextField": (str, type(None)),
    # A JSONField's None is SQL NULL (its `get_db_prep_save` returns it as it is); only `Value(None, JSONField())`
    # is JSON null, and no hot-path write passes one.
    "JSONField": (type(None),),
    # A bool (or a nullable one's None) is what a BooleanField's `get_prep_value` returns, and no backend adapts it.
    "BooleanField": (bool, type(None)),
}
_COMPARISONS = {"exact": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_SHARED_KINDS = frozenset({"DateTimeField", "JSONField"})  # adapted alike by every field of the kind (and encoder)


# By id(field), since hashing a Field runs Python code; each entry keeps its field alive, so no other object can
# take its id.
_plain_by_field: dict[int, tuple[Field, tuple[type, ...]]] = {}


def plain_types(field: Field) -> tuple[type, ...]:
    """The value types `field` takes as they are (looked up once per field: this runs for every value written)."""
    found = _plain_by_field.get(id(field))
    if found is None:
        found = _plain_by_field[id(field)] = (field, _PLAIN.get(field.get_internal_type(), ()))
    return found[1]


class Adapter:
    """`prep_save` for one fixed list of fields, with what adapting a value needs per field (its plain types, and
    for a datetime or JSON field the memo key its kind shares) looked up once, when the statement is built: this
    runs for every value of every hot-path write."""

    def __init__(self, fields: Sequence[Field]) -> None:
        self.fields = list(fields)
        self._steps = [(f, plain_types(f), _shared_key(f)) for f in self.fields]

    def __call__(self, values: Sequence[Any], connection, *, memo: dict[tuple, Any] | None = None) -> list[Any]:
        out = []
        for (f, plain, shared), v in zip(self._steps, values, strict=True):
            if type(v) not in plain:
                if memo is None:
                    v = f.get_db_prep_save(v, connection)
                else:
                    key = (id(v), *shared) if shared is not None else (id(v), id(f))
                    found = memo.get(key, _MISSING)
                    if found is _MISSING:
                        found = memo[key] = f.get_db_prep_save(v, connection)
                    v = found
            out.append(v)
        return out


_MISSING = object()


def _shared_key(field: Field) -> tuple[str, Any] | None:
    kind = field.get_internal_type()
    return (kind, getattr(field, "encoder", None)) if kind in _SHARED_KINDS else None


def prep_save(fields: Sequence[Field], values: Sequence[Any], connection, *,
              memo: dict[tuple, Any] | None = None) -> list[Any]:
    """`values` as the database takes them for `fields`, as the ORM adapts what it writes (a statement that runs
    often builds an `Adapter` for its fields once instead).

    `memo`: adapted values by object, for one write whose rows share objects (one timestamp for every row, a
    payload stored in two tables), so each is adapted once. A datetime or JSON value is shared between fields of
    the same kind (their adaptation depends on nothing else), any other value only within its own field. Keep the
    memo for one write only, while its values live: an `id` names its object only while the object lives."""
    return Adapter(fields)(values, connection, memo=memo)


def prep_lookup(fields: Sequence[Field], values: Sequence[Any], connection) -> list[Any]:
    """`values` as the database takes them in a WHERE on `fields`, as a lookup adapts them."""
    return [v if type(v) in plain_types(f) else f.get_db_prep_value(v, connection, prepared=False)
            for f, v in zip(fields, values, strict=True)]


def converters(fields: Sequence[Field], alias: str, connection) -> list[list[tuple[Any, Any]]]:
    """Per field, the converters the ORM applies to a value read from `alias`.<column>: the backend's, then the
    field's (JSON decoding, aware datetimes, UUIDs, booleans)."""
    cols = [f.get_col(alias) for f in fields]
    return [[(conv, col) for conv in connection.ops.get_db_converters(col) + col.get_db_converters(connection)]
            for col in cols]


def convert(row: Sequence[Any], field_converters: list[list[tuple[Any, Any]]], connection) -> list[Any]:
    """A row read from the database, through `converters`' functions, as a queryset would return it."""
    values = list(row)
    for i, steps in enumerate(field_converters):
        for conv, col in steps:
            values[i] = conv(values[i], col, connection)
    return values


def _where(model: type[Model], lookups: Sequence[str], quote) -> tuple[str, list[Field]]:
    parts, fields = [], []
    for lookup in lookups:
        name, _, op = lookup.partition("__")
        field = model._meta.pk if name == "pk" else model._meta.get_field(name)
        parts.append(f"{quote(field.column)} {_COMPARISONS[op or 'exact']} %s")
        fields.append(field)
    return " AND ".join(parts), fields


class Update:
    """`UPDATE <table> SET a = %s, ..., n = n + %s WHERE <lookups>`: `run` returns how many rows it changed.

    `set`: fields given a value; `add`: fields increased by an amount; `where`: field lookups (`name`,
    `name__gte`, ...), all true at once. `run`'s values come in those orders. Like `QuerySet.update`, it does not
    touch `auto_now` fields."""

    def __init__(self, model: type[Model], *, set: Sequence[str] = (), add: Sequence[str] = (),  # noqa: A002
                 where: Sequence[str]) -> None:
        self.model = model
        self._set, self._add, self._lookups = tuple(set), tuple(add), tuple(where)
        self.set_fields = [model._meta.get_field(n) for n in self._set]
        self.add_fields = [model._meta.get_field(n) for n in self._add]
        self._adapt_set, self._adapt_add = Adapter(self.set_fields), Adapter(self.add_fields)
        self._sql: dict[str, tuple[str, list[Field]]] = {}  # by database vendor

    def _compiled(self, connection) -> tuple[str, list[Field]]:
        found = self._sql.get(connection.vendor)
        if found is None:
            quote = connection.ops.quote_name
            assignments = [f"{quote(f.column)} = %s" for f in self.set_fields]
            assignments += [f"{quote(f.column)} = {quote(f.column)} + %s" for f in self.add_fields]
            where, where_fields = _where(self.model, self._lookups, quote)
            found = self._sql[connection.vendor] = (
                f"UPDATE {quote(self.model._meta.db_table)} SET {', '.join(assignments)} WHERE {where}", where_fields)
        return found

    def run(self, *, values: Sequence[Any] = (), add: Sequence[Any] = (), where: Sequence[Any],
            memo: dict[tuple, Any] | None = None, cursor=None) -> int:
        """`memo`: as `prep_save`'s; `cursor`: a caller's open cursor (an append's, inside its transaction)."""
        connection = cursor.db if cursor is not None else connections[router.db_for_write(self.model)]
        sql, where_fields = self._compiled(connection)
        params = self._adapt_set(values, connection, memo=memo)
        if add:
            params += self._adapt_add(add, connection)
        params += prep_lookup(where_fields, where, connection)
        if cursor is not None:
            cursor.execute(sql, params)
            return cursor.rowcount
        with connection.cursor() as own:
            own.execute(sql, params)
            return own.rowcount


class Select:
    """`SELECT <columns> FROM <table> WHERE <lookups> LIMIT 1`, read as the ORM reads it.

    `columns`: the fields to read (`values` returns them converted, or None when no row matches); without
    `columns`, every concrete field, and `get` returns the model instance `QuerySet.get` builds (raising the
    model's DoesNotExist). `exists` answers without reading a column. The lookups must single out one row (a
    unique key) for `get`; `values` and `exists` take any row that matches. `all` is the one without LIMIT: the
    model instances of every matching row (without `columns`), ascending by the `order_by` fields if given, else
    in no particular order."""

    def __init__(self, model: type[Model], *, columns: Sequence[str] | None = None, where: Sequence[str],
                 order_by: Sequence[str] = ()) -> None:
        self.model = model
        self._order_by = [model._meta.get_field(n) for n in order_by]
        self.fields = ([model._meta.get_field(n) for n in columns] if columns is not None
                       else list(model._meta.concrete_fields))
        self._lookups = tuple(where)
        self._sql: dict[str, tuple[str, str, list[Field], list, str]] = {}  # by database vendor

    def _compiled(self, connection) -> tuple[str, str, list[Field], list, str]:
        found = self._sql.get(connection.vendor)
        if found is None:
            quote, table = connection.ops.quote_name, self.model._meta.db_table
            where, where_fields = _where(self.model, self._lookups, quote)
            columns = ", ".join(quote(f.column) for f in self.fields) or "1"
            found = self._sql[connection.vendor] = (
                f"SELECT {columns} FROM {quote(table)} WHERE {where} LIMIT 1",
                f"SELECT 1 FROM {quote(table)} WHERE {where} LIMIT 1",
                where_fields, converters(self.fields, table, connection),
                f"SELECT {columns} FROM {quote(table)} WHERE {where}"
                + (f" ORDER BY {', '.join(quote(f.column) for f in self._order_by)}" if self._order_by else ""),
            )
        return found

    def _row(self, sql_index: int, where: Sequence[Any]):
        connection = connections[router.db_for_read(self.model)]
        compiled = self._compiled(connection)
        with connection.cursor() as cursor:
            cursor.execute(compiled[sql_index], prep_lookup(compiled[2], where, connection))
            return connection, compiled[3], cursor.fetchone()

    def values(self, *, where: Sequence[Any]) -> list[Any] | None:
        connection, field_converters, row = self._row(0, where)
        return None if row is None else convert(row, field_converters, connection)

    def get(self, *, where: Sequence[Any]) -> Model:
        connection, field_converters, row = self._row(0, where)
        if row is None:
            raise self.model.DoesNotExist(f"{self.model._meta.object_name} matching query does not exist.")
        return self.model.from_db(connection.alias, [f.attname for f in self.fields],
                                  convert(row, field_converters, connection))

    def exists(self, *, where: Sequence[Any]) -> bool:
        return self._row(1, where)[2] is not None

    def all(self, *, where: Sequence[Any]) -> list[Model]:
        connection = connections[router.db_for_read(self.model)]
        compiled = self._compiled(connection)
        with connection.cursor() as cursor:
            cursor.execute(compiled[4], prep_lookup(compiled[2], where, connection))
            rows = cursor.fetchall()
        names = [f.attname for f in self.fields]
        return [self.model.from_db(connection.alias, names, convert(row, compiled[3], connection)) for row in rows]
