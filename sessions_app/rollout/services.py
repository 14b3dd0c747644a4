"""Writes to sessions: create, append items, append any rollout line, rebuild and verify the projection.

Every write takes the per-session lock (the session row, locked by the append's guarded header UPDATE or, when the
caller's copy is stale, by `SELECT ... FOR UPDATE`; on SQLite the IMMEDIATE transaction mode serialises writers),
appends rollout lines, and updates the cached projection (LiveItem rows and the session's header fields) with the
same fold a rebuild uses, in one transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from uuid6 import uuid7

from compaction_app.engine.items import Item, is_model_generated
from compaction_app.engine.tokens import TokenCounter, counter
from compaction_app.engine.windows import new_window_id
from compaction_app.limits import auto_compact_limit
from compaction_app.models import CompactionPolicy, Provider
from compactweb import statements
from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session, StagedRolloutLine
from sessions_app.rollout import events, selectors
from sessions_app.rollout import projection as p
from sessions_app.rollout.lease import Lease, LeaseLost, LeaseNotFree, refuse_if_followed
from sessions_app.rollout.signals import rollout_appended
from sessions_app.rollout.validation import validate_item, validate_items, validate_tools

ORIGINATOR = "compactweb"


@dataclass(frozen=True)
class LeaseTerms:
    """What a turn's write asks of the session's lease (`append_rollout_lines(lease=)`), all in the write's own
    transaction. `release`: a holder whose lease this write releases (the last write of a turn), if it still holds
    it. `take`: a lease (`lease.planned`) this write takes, as the first write of an own-lease turn does: when the
    session is leased, or its rollout moved past the `last_seq` the session was read at, LeaseNotFree is raised and
    nothing is written; so it is when `unchanged` (called with the append's cursor, under the lock) answers False.
    `held_by`: a holder that must still hold the session under the lock (a turn's later writes): when it does not,
    LeaseLost is raised and nothing is written (whoever took the lease over, or reaped it, ended that holder's
    turn)."""

    release: str | None = None
    take: Lease | None = None
    unchanged: Callable[[Any], bool] | None = None
    held_by: str | None = None


NO_LEASE_TERMS = LeaseTerms()


@dataclass(frozen=True)
class NewLine:
    """A rollout line to append. Seq, timestamp and token counts are assigned by `append_rollout_lines`
    (`timestamp` keeps an imported line's original time; None = now)."""

    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    timestamp: datetime | None = None


def counter_for(session: Session) -> TokenCounter:
    """The token counter the session's policy selects: the provider's tiktoken encoding or Codex's estimator."""
    return counter(session.policy.counter_name(session.provider))


def usage_line(
    *, usage: dict[str, Any], reasoning_included: bool = False, model_context_window: int | None = None
) -> NewLine:
    """An `event_msg` `token_count` line carrying a model response's usage (spec §3.2, §15)."""
    total = int(usage.get("total_tokens") or 0) or int(usage.get("input_tokens") or 0) + int(
        usage.get("output_tokens") or 0
    )
    last = {
        "input_tokens": int(usage.get("input_tokens") or 0),
        "cached_input_tokens": int(usage.get("cached_input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "reasoning_output_tokens": int(usage.get("reasoning_output_tokens") or 0),
        "total_tokens": total,
    }
    return NewLine(
        p.EVENT_MSG,
        {
            "type": "token_count",
            "info": {"last_token_usage": last, "model_context_window": model_context_window},
            "rate_limits": None,
            "reasoning_included": reasoning_included,
        },
    )


def estimate_line() -> NewLine:
    """A `token_count` recompute: the meter's base becomes the estimate of the whole history (spec §3.2)."""
    return NewLine(p.EVENT_MSG, {"type": "token_count", "source": "estimate", "info": {"last_token_usage": {}}})


def _prepare(line: NewLine, header: p.Header, tokens_of: TokenCounter) -> tuple[dict, int, list[int] | None]:
    """Validate and count a line's items once, and fill the fields the service owns (window ids, estimates)."""
    kind, payload = line.kind, dict(line.payload)
    if kind not in p.LINE_KINDS:
        raise ValueError(f"unknown rollout line kind {kind!r}; choose one of {', '.join(p.LINE_KINDS)}")
    tokens, item_tokens = 0, None
    if kind == p.RESPONSE_ITEM:
        payload = validate_item(payload, "item")
        tokens = tokens_of.count_item(payload)
    elif kind in p.HISTORY_INSTALLING_KINDS:
        history = validate_items(payload.get("replacement_history"), "replacement_history")
        item_tokens = [tokens_of.count_item(i) for i in history]
        tokens = sum(item_tokens)
        payload["replacement_history"] = history
    elif kind == p.SESSION_META:
        base = payload.get("base_instructions") or {}
        tokens = tokens_of.count_text(base.get("text", "") if isinstance(base, dict) else str(base))
    elif kind == p.EVENT_MSG and payload.get("type") == "token_count" and payload.get("source") == "estimate":
        estimate = header.meter.base_tokens + header.meter.history_tokens
        payload["info"] = {"last_token_usage": {"total_tokens": estimate}}
    if kind == p.COMPACTED and not payload.get("window_id") and payload.get("window_number") is not None:
        # spec §1.5: a legacy rollout's numeric window id was read as the window number; its window has no id.
        # Both are kept as the file says: no number of our own, no minted id.
        payload["window_id"] = ""
        payload.setdefault("previous_window_id", header.window_id)
        payload.setdefault("first_window_id", header.first_window_id)
    elif kind in (p.COMPACTED, p.WINDOW_OPENED) and not payload.get("window_id"):
        # spec §9: every successful compaction (and a new token-budget window) opens the next window.
        payload.update(
            window_number=header.window_number + 1,
            window_id=new_window_id(),
            previous_window_id=header.window_id,
            first_window_id=header.first_window_id,
        )
    return payload, tokens, item_tokens


# What the append lock reads: the header fold's columns plus the few the live summary shows, never the JSON columns
# (initial_context, fault_injection) or the provider and policy rows the caller already holds.
LOCK_FIELDS = (*Session.HEADER_FIELDS, "title", "state", "provider_id", "policy_id", "lease_holder")
# What the header write compares with the caller's copy. The other header columns change only with `last_seq`
# (an append) or with `updated_at` (a rebuild); none of these is nullable, so `=` compares them.
GUARD_FIELDS = ("last_seq", "updated_at", "lease_holder", "state", "title", "provider_id", "policy_id")
KNOWN_FIELDS = (*LOCK_FIELDS, "updated_at", "lease_purpose", "lease_expires_at")  # what an append sets on the copy


class _AppendStatements:
    """The append's statements as SQL written once per database (write the header, guarded by the caller's copy;
    insert the lines; insert the live items; and, when the copy was stale, lock and read the header and write it
    again), run on Django's cursor inside the append's transaction.

    An append is the hottest write of the dashboard (every model response of every session), and building these
    statements through the ORM cost several times the statements themselves. Values go through each field's own
    `get_db_prep_save`, so JSON, datetimes and booleans are adapted exactly as the ORM adapts them."""

    def __init__(self, connection) -> None:
        quote = connection.ops.quote_name
        self.lock_fields = [Session._meta.get_field(name) for name in LOCK_FIELDS]
        # How each header column is read back: as it comes when its type is already the field's, else through
        # the field's `to_python` (looked up here once, not per column of every append).
        self.lock_readers = [(f.attname, statements.plain_types(f), f.to_python) for f in self.lock_fields]
        lock_for = " FOR UPDATE" if connection.features.has_select_for_update else ""
        self.lock = (f"SELECT {', '.join(quote(f.column) for f in self.lock_fields)} "
                     f"FROM {quote(Session._meta.db_table)} WHERE {quote('id')} = %s{lock_for}")
        columns = ("session", "seq", "timestamp", "kind", "payload", "tokens", "item_tokens", "actor")
        line_fields = [RolloutLine._meta.get_field(n) for n in columns]
        stage_fields = [StagedRolloutLine._meta.get_field(n) for n in columns]
        live_fields = [LiveItem._meta.get_field(n) for n in
                       ("session", "position", "item", "tokens", "source_seq", "model_generated")]
        self.insert_line = self._insert(RolloutLine, line_fields, quote)
        self.insert_stage = self._insert(StagedRolloutLine, stage_fields, quote)
        self.insert_live = self._insert(LiveItem, live_fields, quote)
        self.adapt_line, self.adapt_stage, self.adapt_live = map(statements.Adapter,
                                                                 (line_fields, stage_fields, live_fields))

    def _insert(self, model, fields, quote) -> str:
        return f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) VALUES "

    def read_header(self, cursor, session_id: int) -> dict[str, Any]:
        cursor.execute(self.lock, [session_id])
        row = cursor.fetchone()
        if row is None:
            raise Session.DoesNotExist(f"no session {session_id}")
        return {name: v if type(v) in plain else to_python(v)
                for (name, plain, to_python), v in zip(self.lock_readers, row, strict=True)}

    def insert(self, cursor, sql: str, adapt: statements.Adapter, rows: list[tuple], *,
               memo: dict[tuple, Any] | None = None) -> None:
        """The rows as one multi-row INSERT per batch (as bulk_create does): `executemany` runs the statement once
        per row, on PostgreSQL a pipelined round trip each, which made a one-item append's INSERT cost twice a
        plain one. A batch stays under the database's limit on query parameters (999 on SQLite)."""
        width = len(adapt.fields)
        limit = cursor.db.features.max_query_params
        batch = max(1, (limit or MAX_INSERT_ROWS * width) // width)
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            params = [v for row in chunk for v in adapt(row, cursor.db, memo=memo)]
            cursor.execute(sql + ", ".join([self._row(width)] * len(chunk)), params)

    @staticmethod
    def _row(width: int) -> str:
        return f"({', '.join(['%s'] * width)})"

    def write_header(self, cursor, session_id: int, changes: dict[str, Any], *, guard: dict[str, Any] | None = None,
                     memo: dict[tuple, Any] | None = None) -> bool:
        """Write `changes` to the session's row; with `guard`, only if its `GUARD_FIELDS` still hold those
        values. Returns whether the row was written."""
        guarded = GUARD_FIELDS if guard is not None else ()
        key = (tuple(changes), guard is not None)
        update = _header_updates.get(key)
        if update is None:
            update = _header_updates[key] = statements.Update(Session, set=key[0], where=("pk", *guarded))
        return update.run(values=list(changes.values()), where=(session_id, *(guard[n] for n in guarded)),
                          memo=memo, cursor=cursor) == 1


_statements: dict[str, _AppendStatements] = {}  # by database vendor
_header_updates: dict[tuple[tuple[str, ...], bool], statements.Update] = {}  # by the columns written, and guarded
_LINE_ATTNAMES = ("id", "session_id", "seq", "timestamp", "kind", "payload", "tokens", "item_tokens", "actor_id")
assert tuple(f.attname for f in RolloutLine._meta.concrete_fields) == _LINE_ATTNAMES, "the append builds rows by position"
MAX_INSERT_ROWS = 1_000  # rows per INSERT where the database sets no parameter limit (PostgreSQL)

def _append_statements(connection) -> _AppendStatements:
    found = _statements.get(connection.vendor)
    if found is None:  # the SQL depends only on the database kind; values are adapted per connection
        found = _statements[connection.vendor] = _AppendStatements(connection)
    return found


@dataclass
class _Plan:
    """What an append writes, folded from one header: the rollout rows, the live items, the windows it opens."""

    header: p.Header
    rows: list[RolloutLine]
    live: list[tuple]  # LiveItem rows as the INSERT's values (no model instances: none is returned)
    windows: list[ContextWindow]
    replaced: bool


def _plan(*, session: Session, lines: Sequence[NewLine], actor, actor_id, now: datetime) -> _Plan:
    """Validate, count and fold `lines` onto the header `session` carries (spec §8.2's fold, one line at a time)."""
    tokens_of = counter_for(session)
    session_field = RolloutLine._meta.get_field("session")
    actor_field = RolloutLine._meta.get_field("actor") if actor is not None and actor_id is not actor else None
    header = session.header
    plan = _Plan(header=header, rows=[], live=[], windows=[], replaced=False)
    for new in lines:
        payload, tokens, item_tokens = _prepare(new, header, tokens_of)
        line = p.Line(seq=header.last_seq + 1, kind=new.kind, payload=payload, tokens=tokens, item_tokens=item_tokens)
        next_header, change = p.apply_line(header, line)
        # Positional, in _LINE_ATTNAMES order: the keyword path of Model.__init__ cost a tenth of a one-item append.
        row = RolloutLine(None, session.pk, line.seq, new.timestamp or now, line.kind, payload, tokens, item_tokens,
                          actor_id)
        session_field.set_cached_value(row, session)  # as `session=session` does, without the descriptor's checks
        if actor_field is not None:
            actor_field.set_cached_value(row, actor)
        plan.rows.append(row)
        if isinstance(change, p.Replaced):
            plan.replaced, plan.live = True, []
        if change is not None:
            start = 0 if isinstance(change, p.Replaced) else header.item_count
            plan.live.extend(
                (session.pk, start + i, e.item, e.tokens, e.source_seq, e.model_generated)
                for i, e in enumerate(change.entries)
            )
        if (next_header.window_id, next_header.window_number) != (header.window_id, header.window_number):
            first = new.kind == p.SESSION_META
            plan.windows.append(
                ContextWindow(
                    session=session, number=next_header.window_number, window_id=next_header.window_id,
                    previous_window_id=next_header.previous_window_id, first_window_id=next_header.first_window_id,
                    opened_by_seq=None if first else line.seq, opened_at=new.timestamp or now,
                    reason="session_start" if first else new.kind, auto_compact_limit=_limit_of(session),
                )
            )
        header = next_header
    plan.header = header
    return plan


def _limit_of(session: Session) -> int | None:
    """The session's auto-compact limit now (a window opening reads it; windows open rarely)."""
    if session.provider_id is None or session.policy_id is None:
        return None
    return auto_compact_limit(provider=session.provider, policy=session.policy)


def _header_changes(*, session: Session, plan: _Plan, known: dict[str, Any], now: datetime,
                    lease: LeaseTerms) -> dict[str, Any]:
    """Set the plan's header (and the lease this write takes or releases) on `session`; return the columns that
    differ from `known` (the header as the write found it), with the time."""
    session.set_header(plan.header)
    session.updated_at = now
    changes = {name: value for name in Session.HEADER_FIELDS if (value := getattr(session, name)) != known[name]}
    changes["updated_at"] = now
    take = lease.take
    if lease.release and lease.release == (take.holder if take is not None else known["lease_holder"]):
        # The row is locked by this transaction and the lease is ours: release it in the same UPDATE (or, taken
        # and released by one write, it was never anyone's to see).
        changes.update(lease_holder="", lease_purpose="", lease_expires_at=None)
        session.lease_holder, session.lease_purpose, session.lease_expires_at = "", "", None
    elif take is not None:
        taken = {"lease_holder": take.holder, "lease_purpose": take.purpose, "lease_expires_at": now + take.ttl}
        changes.update(taken)
        for name, value in taken.items():
            setattr(session, name, value)
    return changes


def _known_header(session: Session) -> dict[str, Any] | None:
    """The caller's copy of what an append reads and sets, or None if the copy lacks a column (a deferred field)."""
    loaded = session.__dict__
    try:
        return {name: loaded[name] for name in KNOWN_FIELDS}
    except KeyError:
        return None


@transaction.atomic
def append_rollout_lines(
    *, session: Session, lines: Sequence[NewLine], actor=None, lease: LeaseTerms = NO_LEASE_TERMS,
    staged: bool = False, publish: bool = True, outbox: list[events.Publication] | None = None,
) -> list[RolloutLine]:
    """Append lines to a session's rollout and update the cached projection, in one transaction.

    Items are validated and counted once here; a `compacted`/`window_opened` line without window fields gets the
    next window (spec §9). Cost is O(lines) plus O(replacement) for lines that install a history, never O(history).
    `session` is refreshed with the new live state. The provider and policy are the ones `session` carries (loaded
    once by the caller, e.g. once per turn). `lease`: what a turn's write asks of the session's lease
    (`LeaseTerms`). `staged`: the lines go to the import's staging table (StagedRolloutLine, installed later by `install_staged_lines`), not the rollout; `publish=False`: no live
    event (an import publishes its own bounded events); `outbox`: the live event goes into this list once the
    append commits, for the caller to send (`events.apublish`), instead of being sent from here.

    The header is written first, folded from the caller's copy and guarded by it (`GUARD_FIELDS`: the rollout's
    `last_seq`, `updated_at`, which every other write of the header columns sets, and the lease, state, title,
    provider and policy the summary and the lease checks use). The UPDATE locks the row as `SELECT ... FOR
    UPDATE` would; when the copy is stale it changes nothing, and the append reads the header under that lock and
    folds again, so a concurrent writer costs a retry in the same transaction, never a failure.
    """
    connection = transaction.get_connection()
    sql = _append_statements(connection)
    cursor = connection.cursor()
    actor_id = getattr(actor, "pk", actor)
    now = timezone.now()
    memo: dict[tuple, Any] = {}  # rows share their timestamp, and a live item is its line's payload: adapted once
    copy = _known_header(session)
    try:
        plan = None
        if copy is not None and not (lease.take is not None and copy["lease_holder"]) and not (
                lease.held_by is not None and copy["lease_holder"] != lease.held_by):
            # (A copy that says leased goes to the read under the lock, which decides and refuses; a write guarded
            # by a copy held by `held_by` finds the row still held by it, as `lease_holder` is a guard field.)
            plan = _plan(session=session, lines=lines, actor=actor, actor_id=actor_id, now=now)
            changes = _header_changes(session=session, plan=plan, known=copy, now=now, lease=lease)
            if not sql.write_header(cursor, session.pk, changes, guard=copy, memo=memo):
                session.__dict__.update(copy)  # stale: the read below replaces it
                plan = None
            elif lease.take is not None and lease.unchanged is not None and not lease.unchanged(cursor):
                raise LeaseNotFree(f"session {session.pk} was reconfigured since it was read")
        if plan is None:
            plan = _plan_under_lock(sql, cursor, session=session, lines=lines, actor=actor, now=now, lease=lease,
                                    memo=memo)
        rows = plan.rows
        sql.insert(cursor, *((sql.insert_stage, sql.adapt_stage) if staged else (sql.insert_line, sql.adapt_line)),
                   [(session.pk, r.seq, r.timestamp, r.kind, r.payload, r.tokens, r.item_tokens, actor_id)
                    for r in rows], memo=memo)
        if plan.replaced:
            LiveItem.objects.filter(session=session).delete()
        sql.insert(cursor, sql.insert_live, sql.adapt_live, plan.live, memo=memo)
        if plan.windows:
            ContextWindow.objects.bulk_create(plan.windows)
    except BaseException:
        if copy is not None:  # nothing was written: the caller's copy stays as it was
            session.__dict__.update(copy)
        raise
    cursor.close()
    if publish:
        _publish_on_commit(session=session, rows=rows, outbox=outbox)
    return rows


def _plan_under_lock(sql: _AppendStatements, cursor, *, session: Session, lines: Sequence[NewLine], actor,
                     now: datetime, lease: LeaseTerms, memo: dict) -> _Plan:
    """`append_rollout_lines` without a fresh copy of the header: lock the session row for this transaction (a
    no-op lock on SQLite, whose IMMEDIATE transactions serialise writers), read its header columns (one narrow
    SELECT, not the whole row with its provider and policy), check the lease terms, plan and write the header."""
    read_at = session.last_seq
    fresh = sql.read_header(cursor, session.pk)
    if lease.take is not None and (fresh["lease_holder"] or fresh["last_seq"] != read_at
                                   or (lease.unchanged is not None and not lease.unchanged(cursor))):
        # Leased (possibly expired: taking that over is `lease.acquire`'s), or written or reconfigured since the
        # caller's read, which its decisions (a pre-turn check, the request's settings) were made on.
        raise LeaseNotFree(f"session {session.pk} was leased, written or reconfigured since it was read")
    if lease.held_by is not None and fresh["lease_holder"] != lease.held_by:
        raise LeaseLost(f"the lease on session {session.pk} was lost")
    for name, value in fresh.items():
        setattr(session, name, value)
    plan = _plan(session=session, lines=lines, actor=actor, actor_id=getattr(actor, "pk", actor), now=now)
    changes = _header_changes(session=session, plan=plan, known=fresh, now=now, lease=lease)
    sql.write_header(cursor, session.pk, changes, memo=memo)
    return plan


def describe_lines(rows) -> list[tuple[int, str, str | None]]:
    """What a line event says of each line: its seq, its kind and, for an event line, its event type."""
    return [(r.seq, r.kind, r.payload.get("type") if r.kind == p.EVENT_MSG else None) for r in rows]


def _publish_on_commit(*, session: Session, rows: Sequence[RolloutLine],
                       outbox: list[events.Publication] | None) -> None:
    """Announce `rows` once the append's transaction commits (never for a rolled-back one)."""
    described = describe_lines(rows)
    # The summary is of the columns this transaction locked and wrote, so publishing reads nothing back.
    summary = selectors.SummaryAt(session)
    session_id = session.pk
    transaction.on_commit(
        lambda: announce_committed(session_id=session_id, summary=summary, lines=described, outbox=outbox)
    )


def announce_committed(*, session_id: int, summary, lines: list[tuple[int, str, str | None]],
                       outbox: list[events.Publication] | None = None) -> None:
    """What follows committed lines: their live event, sent now or left in `outbox` for the caller to send from
    its event loop, and `rollout_appended` for the apps that listen (the gateway)."""
    publication = events.lines_publication(session_id=session_id, summary=summary, lines=lines)
    if outbox is None:
        events.publish(publication)
    elif publication is not None:
        outbox.append(publication)
    if rollout_appended.has_listeners(Session):
        rollout_appended.send(sender=Session, session_id=session_id, seqs=[seq for seq, _, _ in lines], lines=lines,
                              summary=summary)


def install_staged_lines(*, session_id: int) -> int:
    """Move an import's staged lines into the append-only rollout with one INSERT ... SELECT and delete them from
    the stage, in the caller's transaction. Returns how many lines were installed."""
    # Hand SQL because the ORM has no INSERT ... SELECT: through it every staged line would come into the process
    # and go back out (a 100k-line import's rows in memory at once), which the staged import exists to avoid.
    connection = transaction.get_connection()
    quote = connection.ops.quote_name
    columns = ", ".join(quote(RolloutLine._meta.get_field(n).column) for n in
                        ("session", "seq", "timestamp", "kind", "payload", "tokens", "item_tokens", "actor"))
    stage, rollout = quote(StagedRolloutLine._meta.db_table), quote(RolloutLine._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {rollout} ({columns}) SELECT {columns} FROM {stage} "
                       f"WHERE {quote('session_id')} = %s ORDER BY {quote('seq')}", [session_id])
        installed = cursor.rowcount
        cursor.execute(f"DELETE FROM {stage} WHERE {quote('session_id')} = %s", [session_id])
    return installed


def append_rollout_line(*, session: Session, kind: str, payload: dict[str, Any], actor=None) -> RolloutLine:
    """Append one line (see `append_rollout_lines`). To write several atomically, use the plural."""
    return append_rollout_lines(session=session, lines=[NewLine(kind, payload)], actor=actor)[0]


def _as_list(items: Any) -> Any:
    """Tuples become lists; anything else is left for the validator to refuse with a clear message."""
    return list(items) if isinstance(items, tuple) else items


def _item_lines(items: Iterable[Item]) -> list[NewLine]:
    return [NewLine(p.RESPONSE_ITEM, item) for item in items]


@dataclass(frozen=True, kw_only=True)
class ClientOrigin:
    """Whose session it is when another client records it (the gateway: a Codex CLI): that client's thread id (a
    new one when None), the session's `source`, and what its session_meta names as the client's own: originator,
    provider id, working folder, CLI version and Codex session source (`exec`, `cli`, ...), so that an export
    resumes in that client as its own rollout would."""

    thread_id: uuid.UUID | None = None
    source: str = "native"
    originator: str = ORIGINATOR
    model_provider: str | None = None
    cwd: str = ""
    cli_version: str = ""
    client_source: str = ""


NATIVE = ClientOrigin()  # a session compactweb itself starts


def do_create_session(
    *,
    title: str,
    provider: Provider,
    policy: CompactionPolicy,
    base_instructions: str = "",
    initial_context: Sequence[Item] = (),
    items: Sequence[Item] = (),
    fault_injection: dict[str, Any] | None = None,
    tools: Sequence[dict[str, Any]] = (),
    parallel_tool_calls: bool = False,
    actor=None,
    origin: ClientOrigin = NATIVE,
) -> Session:
    """Create a session: a `session_meta` line opening window 0 and the given items. Invalid items raise before
    anything is stored.

    The initial context is stored on the session. With no items (a fresh thread) it is not written yet: as in
    Codex, the first turn's pre-turn check sees an empty history and the turn records the context as its context
    update, after `turn_started` (spec §2.4.1, §5.3). With items (a thread that already has a history, e.g. an
    import) the context is written first, then a `turn_context` marking it installed, then the items.
    `origin`: a session recorded from another client (the gateway) keeps that client's thread id and provider id,
    so an export resumes under them."""
    context = validate_items(_as_list(initial_context), "initial_context")
    body = validate_items(_as_list(items), "items")
    tool_specs = validate_tools(_as_list(tools), "tools")
    with transaction.atomic():
        thread_id = origin.thread_id or uuid.UUID(int=uuid7().int)
        window_id = new_window_id()
        session = Session.objects.create(
            title=title, provider=provider, policy=policy, base_instructions=base_instructions,
            initial_context=context, thread_id=thread_id, model=provider.model, fault_injection=fault_injection or {},
            tools=tool_specs, parallel_tool_calls=bool(parallel_tool_calls), source=origin.source,
        )
        lines = [
            NewLine(
                p.SESSION_META,
                {
                    "id": str(thread_id),
                    "timestamp": timezone.now().isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                    "originator": origin.originator,
                    **({"cwd": origin.cwd} if origin.cwd else {}),
                    **({"cli_version": origin.cli_version} if origin.cli_version else {}),
                    "source": origin.client_source or "api",
                    "model_provider": origin.model_provider or provider.name,
                    "model": provider.model,
                    "base_instructions": {"text": base_instructions},
                    "window_number": 0,
                    "window_id": window_id,
                    "first_window_id": window_id,
                },
            )
        ]
        if context and body:
            lines += _item_lines(context)
            lines.append(NewLine(p.TURN_CONTEXT, {"turn_id": "", "model": provider.model, "source": "session_start"}))
        lines += _item_lines(body)
        if any(is_model_generated(i) for i in body):
            lines.append(estimate_line())
        append_rollout_lines(session=session, lines=lines, actor=actor)
    return session


@dataclass(frozen=True)
class AppendResult:
    session: Session
    lines: list[RolloutLine]


def do_append_items(
    *,
    session: Session,
    items: Sequence[Item],
    usage: dict[str, Any] | None = None,
    reasoning_included: bool = False,
    estimate_if_no_usage: bool = True,
    actor=None,
) -> AppendResult:
    """Append items (a new user message, or a turn's output) as `response_item` lines, O(1) per item.

    With `usage` (the response's usage object) a `token_count` line follows the items (spec §3.2). Without it, if
    the items include model output, a recompute line follows instead so the meter keeps counting the history
    (set `estimate_if_no_usage=False` when the caller records usage itself). Invalid items raise
    `ItemValidationError` and nothing is stored; a followed session raises SessionReadOnly (it is read-only).
    """
    refuse_if_followed(session_id=session.pk)
    validated = validate_items(_as_list(items), "items")
    lines = _item_lines(validated)
    if usage is not None:
        lines.append(
            usage_line(
                usage=usage,
                reasoning_included=reasoning_included,
                model_context_window=session.provider.usable_context_window,
            )
        )
    elif estimate_if_no_usage and any(is_model_generated(i) for i in validated):
        lines.append(estimate_line())
    rows = append_rollout_lines(session=session, lines=lines, actor=actor)
    return AppendResult(session=session, lines=rows)


def do_record_usage(
    *, session: Session, usage: dict[str, Any], reasoning_included: bool = False, actor=None
) -> RolloutLine:
    """Record a model response's usage as a `token_count` line (spec §3.2)."""
    line = usage_line(
        usage=usage, reasoning_included=reasoning_included,
        model_context_window=session.provider.usable_context_window,
    )
    return append_rollout_lines(session=session, lines=[line], actor=actor)[0]


def _rollout(session: Session) -> Iterable[p.Line]:
    rows = (
        RolloutLine.objects.filter(session_id=session.pk)
        .order_by("seq")
        .values_list("seq", "kind", "payload", "tokens", "item_tokens")
    )
    for seq, kind, payload, tokens, item_tokens in rows.iterator(chunk_size=2000):
        yield p.Line(seq=seq, kind=kind, payload=payload, tokens=tokens, item_tokens=item_tokens)


def project_rollout(*, session: Session) -> p.Projection:
    """The live state a rebuild from the rollout gives (spec §8.2, with our line kinds)."""
    return p.Projection.rebuild(_rollout(session))


@transaction.atomic
def rebuild_projection(*, session: Session) -> Session:
    """Rewrite the cached projection (LiveItem rows, header fields) from the rollout."""
    locked = Session.objects.select_for_update().get(pk=session.pk)
    projection = project_rollout(session=locked)
    LiveItem.objects.filter(session=locked).delete()
    LiveItem.objects.bulk_create(
        LiveItem(
            session=locked, position=i, item=e.item, tokens=e.tokens, source_seq=e.source_seq,
            model_generated=e.model_generated,
        )
        for i, e in enumerate(projection.entries)
    )
    locked.set_header(projection.header)
    locked.save(update_fields=[*Session.HEADER_FIELDS, "updated_at"])
    session.refresh_from_db()
    return session


@transaction.atomic
def verify_projection(*, session: Session) -> list[str]:
    """Compare the cached projection with a rebuild from the rollout; returns the differences (empty = equal)."""
    locked = Session.objects.select_for_update().get(pk=session.pk)
    projection = project_rollout(session=locked)
    problems = []
    cached, rebuilt = locked.header, projection.header
    if cached != rebuilt:
        for name in rebuilt.__dataclass_fields__:
            if getattr(cached, name) != getattr(rebuilt, name):
                problems.append(f"header.{name}: cached {getattr(cached, name)!r} != rebuilt {getattr(rebuilt, name)!r}")
    stored = list(
        LiveItem.objects.filter(session=locked)
        .order_by("position")
        .values_list("position", "item", "tokens", "source_seq", "model_generated")
    )
    expected = [(i, e.item, e.tokens, e.source_seq, e.model_generated) for i, e in enumerate(projection.entries)]
    if len(stored) != len(expected):
        problems.append(f"live items: cached {len(stored)} != rebuilt {len(expected)}")
    for got, want in zip(stored, expected, strict=False):
        if got != want:
            problems.append(f"live item {want[0]}: cached {got[1:]!r} != rebuilt {want[1:]!r}")
            break
    return problems
