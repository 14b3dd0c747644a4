"""Reads of sessions: lists, one session's live summary, its history and its rollout."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.models import Q, QuerySet

from compaction_app.engine.items import Item
from compaction_app.limits import auto_compact_limit
from compaction_app.models import CompactionPolicy, Provider
from compactweb import statements
from sessions_app.models import LiveItem, RolloutLine, Session


def list_sessions(*, state: str | None = None, before: int | None = None, limit: int | None = None) -> list[Session]:
    """Sessions newest first: a keyset page of `limit` sessions older than session `before` (absent: the newest).
    One index range read on (created_at, id) (or (state, created_at, id)) whatever the number of sessions; a
    `before` that names no session gives an empty page."""
    sessions = Session.objects.select_related("provider", "policy")
    if state:
        sessions = sessions.filter(state=state)
    if before is not None:
        anchor = Session.objects.filter(pk=before).values_list("created_at", flat=True).first()
        if anchor is None:
            return []
        sessions = sessions.filter(Q(created_at__lt=anchor) | Q(created_at=anchor, pk__lt=before))
    sessions = sessions.order_by("-created_at", "-pk")
    return list(sessions[:limit] if limit is not None else sessions)


# The session's columns its own appends and leases write: not configuration, so no part of a `ConfigStamp`.
WRITTEN_BY_APPENDS = frozenset((*Session.HEADER_FIELDS, "lease_holder", "lease_purpose", "lease_expires_at",
                                "updated_at"))


@dataclass(frozen=True)
class ConfigStamp:
    """A session's configuration as `get_session_stamped` read it: the raw column values of the session (but
    `WRITTEN_BY_APPENDS`), its provider and its policy."""

    session_id: int
    values: tuple


class _SessionRead:
    """`get_session`'s SELECT (the session row joined to its provider and policy) written once per database kind.

    Every turn, compaction and simulator step starts with this read; compiling the three-table `select_related`
    through the ORM cost several times running it (about 2 ms a call). The row is split back into the three models
    with `Model.from_db`, and each value goes through the converters the ORM itself applies (the database
    backend's, then the field's: JSON, datetimes, UUIDs, booleans), so the objects are the ones the ORM builds."""

    MODELS = ((Session, "s"), (Provider, "p"), (CompactionPolicy, "c"))

    def __init__(self, connection) -> None:
        quote = connection.ops.quote_name
        columns, self.parts = [], []
        self.config_positions: list[int] = []
        for model, alias in self.MODELS:
            fields = model._meta.concrete_fields
            self.config_positions += [
                len(columns) + i for i, f in enumerate(fields)
                if not (model is Session and f.attname in WRITTEN_BY_APPENDS)
            ]
            columns += [f"{alias}.{quote(f.column)}" for f in fields]
            self.parts.append((model, [f.attname for f in fields], statements.converters(fields, alias, connection)))
        fk = {name: Session._meta.get_field(name).column for name in ("provider", "policy")}
        joined = (
            f"FROM {quote(Session._meta.db_table)} s "
            f"INNER JOIN {quote(Provider._meta.db_table)} p "
            f"ON p.{quote(Provider._meta.pk.column)} = s.{quote(fk['provider'])} "
            f"INNER JOIN {quote(CompactionPolicy._meta.db_table)} c "
            f"ON c.{quote(CompactionPolicy._meta.pk.column)} = s.{quote(fk['policy'])} "
            f"WHERE s.{quote(Session._meta.pk.column)} = %s"
        )
        self.sql = f"SELECT {', '.join(columns)} {joined}"
        self.config_sql = f"SELECT {', '.join(columns[i] for i in self.config_positions)} {joined}"

    def load(self, connection, session_id: int) -> Session:
        return self.load_stamped(connection, session_id)[0]

    def load_stamped(self, connection, session_id: int) -> tuple[Session, ConfigStamp]:
        with connection.cursor() as cursor:
            cursor.execute(self.sql, [session_id])
            row = cursor.fetchone()
        if row is None:
            raise Session.DoesNotExist("Session matching query does not exist.")
        stamp = ConfigStamp(session_id=int(session_id), values=tuple(row[i] for i in self.config_positions))
        objects, start = [], 0
        for model, attnames, converters in self.parts:
            values = statements.convert(row[start:start + len(attnames)], converters, connection)
            start += len(attnames)
            objects.append(model.from_db(connection.alias, attnames, values))
        session, provider, policy = objects
        Session.provider.field.set_cached_value(session, provider)
        Session.policy.field.set_cached_value(session, policy)
        return session, stamp


_session_reads: dict[str, _SessionRead] = {}  # by database vendor


def _session_read(connection) -> _SessionRead:
    read = _session_reads.get(connection.vendor)
    if read is None:  # the SQL depends only on the database kind; values are converted per connection
        read = _session_reads[connection.vendor] = _SessionRead(connection)
    return read


def get_session(*, session_id: int) -> Session:
    """One session with its provider and policy; raises Session.DoesNotExist."""
    connection = connections[router.db_for_read(Session)]
    return _session_read(connection).load(connection, int(session_id))


def get_session_stamped(*, session_id: int) -> tuple[Session, ConfigStamp]:
    """`get_session`, and the stamp of its configuration as read (`config_unchanged` compares a later read)."""
    connection = connections[router.db_for_read(Session)]
    return _session_read(connection).load_stamped(connection, int(session_id))


def config_unchanged(cursor, *, stamp: ConfigStamp) -> bool:
    """Whether the session's configuration (every column of the session but what appends and leases write, and
    its provider and policy rows) is still what `stamp` recorded, as the database holds it: the raw values are
    compared, so an edit through any path (a form, the API, a queryset update) counts, whatever it touched."""
    cursor.execute(_session_read(cursor.db).config_sql, [stamp.session_id])
    row = cursor.fetchone()
    return row is not None and tuple(row) == stamp.values


def session_summary(*, session: Session) -> dict[str, Any]:
    """The live numbers of a session, all O(1) reads of cached fields."""
    return {
        "id": session.pk,
        "title": session.title,
        "state": session.state,
        "source": session.source,
        "thread_id": str(session.thread_id),
        "provider": session.provider_id,
        "policy": session.policy_id,
        "model": session.model,
        "window_number": session.window_number,
        "window_id": session.window_id,
        "previous_window_id": session.previous_window_id or None,
        "first_window_id": session.first_window_id,
        "tokens_in_window": session.tokens_in_window,
        "context_window": session.provider.context_window,
        "usable_context_window": session.provider.usable_context_window,
        "auto_compact_limit": auto_compact_limit(provider=session.provider, policy=session.policy),
        "auto_compact_scope": session.policy.auto_compact_scope,
        "window_prefill": session.meter_prefill,
        "compaction_count": session.compaction_count,
        "live_item_count": session.live_item_count,
        "last_seq": session.last_seq,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


class SummaryAt(Mapping):
    """`session_summary` of a session as it is now, built only when something reads it.

    Every append hands its summary to the live events, which on the embedded default send it only when a page of
    this process watches the session; building it on every append cost a twentieth of a one-item append. The
    session's columns are copied now (plain values: a later write to the session does not change them), its
    provider and policy are the ones it carries."""

    def __init__(self, session: Session) -> None:
        self._session = Session.__new__(Session)
        self._session.__dict__.update(session.__dict__)
        self._summary: dict[str, Any] | None = None

    def _built(self) -> dict[str, Any]:
        if self._summary is None:
            self._summary = session_summary(session=self._session)
        return self._summary

    def __getitem__(self, key: str) -> Any:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def live_items(*, session: Session) -> list[Item]:
    """The model-visible history now, in order."""
    return list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))


def live_items_page(*, session: Session, after: int | None, limit: int) -> tuple[list[Item], int | None]:
    """Up to `limit` items of the model-visible history after position `after` (None: from the first), in order,
    and the position to ask after for the next page (None: this page ends the history). One indexed range read of
    `limit + 1` rows on (session, position), whatever the history's size: a keyset page, never an offset."""
    rows = LiveItem.objects.filter(session=session)
    if after is not None:
        rows = rows.filter(position__gt=after)
    page = list(rows.order_by("position").values_list("position", "item")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return [item for _, item in page], (page[-1][0] if more else None)


def live_entries(*, session: Session) -> QuerySet[LiveItem]:
    return LiveItem.objects.filter(session=session).order_by("position")


_LINES_BETWEEN = statements.Select(RolloutLine, where=("session", "seq__gt", "seq__lte"), order_by=("seq",))


def lines_between(*, session_id: int, after_seq: int, upto_seq: int) -> list[RolloutLine]:
    """The rollout lines after_seq < seq <= upto_seq, in order: what a websocket batch covers, and what a
    process's cached state of a session follows along. One indexed range read, a statement built once
    (compactweb.statements): every live event of every watched session runs it."""
    return _LINES_BETWEEN.all(where=(session_id, after_seq, upto_seq))


def rollout_lines(*, session: Session, after_seq: int = 0) -> Iterator[RolloutLine]:
    """The rollout in order, streamed from the database in chunks."""
    return (
        RolloutLine.objects.filter(session=session, seq__gt=after_seq).order_by("seq").iterator(chunk_size=1000)
    )


def rollout_line_dicts(*, session_id: int, chunk_size: int, after: int = 0) -> Iterator[dict[str, Any]]:
    """The session's rollout lines after seq `after` as plain dicts (seq, timestamp, kind, payload), read in chunks."""
    # One short query per chunk (no cursor held open between chunks), so a streamed response can pull chunks
    # from whichever thread serves it.
    while True:
        rows = list(
            RolloutLine.objects.filter(session_id=session_id, seq__gt=after)
            .order_by("seq")
            .values_list("seq", "timestamp", "kind", "payload")[:chunk_size]
        )
        if not rows:
            return
        for seq, ts, kind, payload in rows:
            yield {"seq": seq, "timestamp": ts, "kind": kind, "payload": payload}
        after = rows[-1][0]
