"""One writer at a time per session: a lease held by a compaction, a turn, or a rollback.

A lease is taken with one conditional UPDATE, so it is atomic on SQLite and PostgreSQL alike and across processes
(Daphne, Celery workers). It expires: a worker killed mid-compaction cannot block its session forever; the next
taker finds the lease expired and takes it over, and in the same transaction finishes the dead holder's compaction
attempts as interrupted (spec §6.5), whoever the taker is: a compaction, a simulator step, a turn or a rollback.
A holder that is still alive renews its lease while it works (`keep_renewed` around provider calls and streams,
every third of the TTL) and checks it still holds it before installing.

The TTL is a setting (`COMPACTWEB_LEASE_TTL_SECONDS`, 30 s by default): a dead holder blocks its session for at
most that long. `reap_expired` lets the scheduler finish a dead holder's attempts even when nobody needs the
session, so the UI stops saying a compaction is running within a tick of the TTL.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from compaction_app.records import mark_stale_attempts
from compactweb import statements
from compactweb.domain_errors import Conflict
from sessions_app.models import Session
from sessions_app.rollout.signals import holder_lost

logger = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 30.0
# A renewal this often leaves two more chances before the lease lapses under a slow database.
RENEWALS_PER_TTL = 3


def lease_ttl() -> timedelta:
    """The lease TTL from settings (COMPACTWEB_LEASE_TTL_SECONDS)."""
    return timedelta(seconds=float(getattr(settings, "COMPACTWEB_LEASE_TTL_SECONDS", DEFAULT_TTL_SECONDS)))


# What every turn and step runs on its lease, written once (compactweb.statements): the ORM took several times
# these one-row statements to build them.
_LEASE_FIELDS = ("lease_holder", "lease_purpose", "lease_expires_at")
_RELEASE = statements.Update(Session, set=_LEASE_FIELDS, where=("pk", "lease_holder"))
_RENEW = statements.Update(Session, set=("lease_expires_at",), where=("pk", "lease_holder"))
_HELD = statements.Select(Session, columns=(), where=("pk", "lease_holder"))
_SOURCE = statements.Select(Session, columns=("source",), where=("pk",))


class SessionBusy(Conflict):
    """Another compaction, turn or rollback holds the session."""

    code = "busy"

    def __init__(self, *, session_id: int, purpose: str):
        self.session_id = session_id
        self.purpose = purpose or "another operation"
        what = f"a {purpose}" if purpose else "another operation"
        super().__init__(f"session {session_id} is busy: {what} is running; try again when it ends")


class SessionReadOnly(SessionBusy):
    """The session follows a Codex rollout file: compactweb never writes into a session it follows (issue 13).
    A SessionBusy, so every caller that refuses a busy session refuses this one too, with this message and, in
    the API, this `code` on every path (issue 30)."""

    code = "read_only"

    def __init__(self, *, session_id: int):
        self.session_id = session_id
        self.purpose = "follow"
        Conflict.__init__(self, f"session {session_id} follows a Codex rollout file and is read-only in compactweb")


FOLLOWED_SOURCE = "followed"
IMPORTING_SOURCE = "importing"  # a Codex rollout still importing (sessions_app.transfer): nothing else writes to it
READ_ONLY_SOURCES = (FOLLOWED_SOURCE, IMPORTING_SOURCE)


def refuse_if_followed(*, session_id: int) -> None:
    """Raise SessionReadOnly for a followed session (or one still importing). Every API append asks first: a
    statement written once (the ORM's `exists()` cost a twentieth of the request)."""
    found = _SOURCE.values(where=(session_id,))
    if found is not None and found[0] in READ_ONLY_SOURCES:
        raise SessionReadOnly(session_id=session_id)


class LeaseLost(Conflict):
    """The lease expired and someone else took the session: the holder must not install anything."""

    code = "lease_lost"


class LeaseNotFree(Exception):
    """A write that was to take the session's lease (`append_rollout_lines(take_lease=)`) found it held, or the
    session changed since its reader read it: nothing was written, and the lease was not taken."""


@dataclass
class Lease:
    session_id: int
    holder: str
    purpose: str
    ttl: timedelta
    took_over_expired: bool = False

    def renew(self) -> None:
        """Push the expiry forward; raises LeaseLost when the lease is no longer ours."""
        if not _RENEW.run(values=(timezone.now() + self.ttl,), where=(self.session_id, self.holder)):
            raise LeaseLost(f"the lease on session {self.session_id} was lost")

    def check(self) -> None:
        """Raise LeaseLost unless we still hold the lease (call inside the installing transaction)."""
        if not _HELD.exists(where=(self.session_id, self.holder)):
            raise LeaseLost(f"the lease on session {self.session_id} was lost")


_take_free_sql: dict[tuple[str, bool], str] = {}  # by database vendor and fast commit
_LEASE_ADAPTER = statements.Adapter([Session._meta.get_field(name) for name in _LEASE_FIELDS])


def _take_free(*, session_id: int, lease_fields: dict, own_transaction: bool = False) -> int:
    """The common case of `acquire`: take a free lease of a writable session with one conditional UPDATE, written
    once per database kind (every turn and step takes a lease; building this UPDATE through the ORM cost about ten
    times running it). Values are adapted by each field's `get_db_prep_save`, as the ORM adapts them.

    `own_transaction`: the UPDATE is all its transaction writes. On PostgreSQL that commit then does not wait for
    the WAL to reach the disk (it was a third of a turn's commits): a lease is not durable state, and a crash that
    loses it loses its holder too, which frees the session. Inside a caller's transaction, whose other writes must
    stay durable, the commit waits as usual."""
    connection = transaction.get_connection()
    fields = _LEASE_ADAPTER.fields
    fast = own_transaction and connection.vendor == "postgresql"
    sql = _take_free_sql.get((connection.vendor, fast))
    if sql is None:
        quote = connection.ops.quote_name
        sql = (
            f"UPDATE {quote(Session._meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
            f"WHERE {quote(Session._meta.pk.column)} = %s AND {quote(fields[0].column)} = %s "
            f"AND {quote(Session._meta.get_field('source').column)} NOT IN ({', '.join(['%s'] * len(READ_ONLY_SOURCES))})"
        )
        if fast:
            # set_config(..., true) is SET LOCAL, run by the same statement: no extra round trip.
            sql = (f"WITH fast AS (SELECT set_config('synchronous_commit', 'off', true)) {sql} "
                   "AND EXISTS (SELECT 1 FROM fast)")
        _take_free_sql[(connection.vendor, fast)] = sql
    values = _LEASE_ADAPTER([lease_fields[f.name] for f in fields], connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, session_id, "", *READ_ONLY_SOURCES])
        return cursor.rowcount


def acquire(*, session_id: int, purpose: str, ttl: timedelta | None = None) -> Lease:
    """Take the session's lease or raise SessionBusy (Session.DoesNotExist if there is no such session);
    SessionReadOnly for a session that follows a Codex rollout file."""
    ttl = lease_ttl() if ttl is None else ttl
    now = timezone.now()
    holder = uuid.uuid4().hex
    lease_fields = {"lease_holder": holder, "lease_purpose": purpose, "lease_expires_at": now + ttl}
    outermost = not transaction.get_connection().in_atomic_block
    with transaction.atomic():
        # The common case, a free session, is one conditional UPDATE; only a held lease is checked for expiry.
        taken = _take_free(session_id=session_id, lease_fields=lease_fields, own_transaction=outermost)
        expired = False
        if not taken:
            sessions = Session.objects.exclude(source__in=READ_ONLY_SOURCES)
            refuse_if_followed(session_id=session_id)  # why it was not taken: read-only, busy, or expired
            taken = (
                sessions.filter(pk=session_id, lease_expires_at__lt=now).exclude(lease_holder="")
                .update(**lease_fields)
            )
            expired = bool(taken)
        if taken and expired:
            # Attempts run only under the lease: one still `running` now belongs to the dead holder.
            mark_stale_attempts(session_id=session_id)
            holder_lost.send(sender=Session, session_id=session_id)
    if not taken:
        current = Session.objects.filter(pk=session_id).values_list("lease_purpose", flat=True).first()
        if current is None:
            raise Session.DoesNotExist(f"no session {session_id}")
        raise SessionBusy(session_id=session_id, purpose=current)
    return Lease(session_id=session_id, holder=holder, purpose=purpose, ttl=ttl, took_over_expired=expired)


def planned(*, session_id: int, purpose: str, ttl: timedelta | None = None) -> Lease:
    """A lease not held yet, for a write to take in its own transaction (`append_rollout_lines(take_lease=)`):
    an own-lease turn takes it with its first lines instead of in a transaction of its own."""
    return Lease(session_id=session_id, holder=uuid.uuid4().hex, purpose=purpose,
                 ttl=lease_ttl() if ttl is None else ttl)


def release(lease: Lease) -> None:
    _RELEASE.run(values=("", "", None), where=(lease.session_id, lease.holder))


@contextmanager
def session_lease(*, session_id: int, purpose: str, ttl: timedelta | None = None) -> Iterator[Lease]:
    """Hold the session's lease for the block; released even when the block raises."""
    lease = acquire(session_id=session_id, purpose=purpose, ttl=ttl)
    try:
        yield lease
    finally:
        release(lease)


def _renew_on_own_connection(lease: Lease) -> None:
    # Runs on a pool thread (not the caller's busy sync thread): close its connection like a request would.
    try:
        lease.renew()
    finally:
        close_old_connections()


@asynccontextmanager
async def keep_renewed(lease: Lease | None) -> AsyncIterator[None]:
    """Renew `lease` every third of its TTL while the block runs (a provider call, a stream, a whole turn).

    A renewal that finds the lease gone (LeaseLost: it expired and someone took it over) stops renewing and
    logs; the holder finds out for certain at `check()` inside its installing transaction. `None` is a no-op,
    so callers that may or may not hold a lease need no branch."""
    if lease is None:
        yield
        return
    interval = lease.ttl.total_seconds() / RENEWALS_PER_TTL
    renew = sync_to_async(_renew_on_own_connection, thread_sensitive=False)

    async def renew_forever() -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await renew(lease)
            except LeaseLost:
                logger.warning("the lease on session %s was lost while its %s ran", lease.session_id, lease.purpose)
                return
            except Exception:  # a database blip: try again at the next interval, while the TTL allows
                logger.exception("could not renew the lease on session %s", lease.session_id)

    renewer = asyncio.ensure_future(renew_forever())
    try:
        yield
    finally:
        renewer.cancel()


def reap_expired(*, now=None) -> list[int]:
    """Free every expired lease and finish its dead holder's `running` attempts as interrupted, in one
    transaction per session; returns the session ids. The same conditional update as a takeover, so a holder
    that renews in the meantime keeps its lease, and a racing taker and the reaper never both win."""
    now = timezone.now() if now is None else now
    reaped = []
    expired = Session.objects.filter(lease_expires_at__lt=now).exclude(lease_holder="")
    for session_id, holder in expired.values_list("pk", "lease_holder"):
        with transaction.atomic():
            freed = Session.objects.filter(pk=session_id, lease_holder=holder, lease_expires_at__lt=now).update(
                lease_holder="", lease_purpose="", lease_expires_at=None
            )
            if freed:
                mark_stale_attempts(session_id=session_id)
                holder_lost.send(sender=Session, session_id=session_id)
                reaped.append(session_id)
    return reaped
