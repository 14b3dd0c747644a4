"""A database that stops answering, or stops accepting writes: how the long-lived loops tell, and get past it.

A request gets a fresh connection (or Django's end-of-request checks close a broken one), but the loops that run
for the life of a process (the simulator scheduler, a Celery worker's step) keep theirs: after a PostgreSQL restart
every statement on the kept connection fails until somebody closes it. `drop_broken_connections` closes on this
thread the connections an error left unusable, and only those (Django's `close_old_connections` also closes every
connection of a process with CONN_MAX_AGE 0, i.e. a reconnect per round); the next statement opens a new one.

`UNAVAILABLE` are the errors of a database that is not there or does not take writes: PostgreSQL down or
restarting (OperationalError, InterfaceError on a closed connection), SQLite's "database or disk is full",
"attempt to write a readonly database" and "database is locked". A caller that meets one waits and tries again
(`wait_until_writable`) instead of recording a failure it cannot write anyway.

A deadlock (PostgreSQL's SQLSTATE 40P01) or a serialization failure (40001) is raised as an OperationalError too,
but the database is there: two transactions met, one was rolled back, and running it again succeeds. It is a
conflict (`is_conflict`), never an outage: `retry_on_conflict` runs the transaction again (a few times, after a
short random wait so the two do not meet again), and only when that fails too does the caller see the error.

`check_writable` is the write probe /healthz runs: a read answers on a read-only or full SQLite file while every
write fails, so a plain `SELECT 1` said the database was fine while users got errors.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections

logger = logging.getLogger(__name__)

UNAVAILABLE = (OperationalError, InterfaceError)
UNAVAILABLE_MESSAGE = "The database is not answering or does not accept changes right now."
WRITE_CONFLICT = "write_conflict"  # the API's error code of a conflict that outlasted its retries
CONFLICT_MESSAGE = ("Another change to the same rows was written at the same moment and yours was rolled back; "
                    "nothing you asked for was half-done. Try again.")
RETRY_SECONDS = 0.5


# SQLSTATEs of a transaction the database rolled back because of another one: deadlock_detected,
# serialization_failure.
CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})
CONFLICT_ATTEMPTS = 5
CONFLICT_BACKOFF_SECONDS = 0.05  # the first retry's wait, doubled each time, each wait a random part of it

T = TypeVar("T")


def _chain(exc: BaseException | None):
    seen = 0
    while exc is not None and seen < 8:
        yield exc
        exc = exc.__cause__ or exc.__context__
        seen += 1


def is_conflict(exc: BaseException | None) -> bool:
    """Whether `exc` (or an error it was raised from) is a deadlock or serialization failure: the database rolled
    the transaction back because of another one, and is there."""
    return any(getattr(e, "sqlstate", None) in CONFLICT_SQLSTATES for e in _chain(exc))


def is_unavailable(exc: BaseException) -> bool:
    """Whether `exc` (or an error it was raised from) says the database is down or refuses writes (a conflict
    does not: `is_conflict`)."""
    if is_conflict(exc):
        return False
    return any(isinstance(e, UNAVAILABLE) for e in _chain(exc))


def retry_on_conflict(work: Callable[[], T], *, attempts: int = CONFLICT_ATTEMPTS,
                      sleep: Callable[[float], None] = time.sleep,
                      jitter: Callable[[float, float], float] = random.uniform) -> T:
    """Run `work` (which opens its own transaction) again when the database rolls it back for a conflict, up to
    `attempts` times in all, waiting a random part of a doubling backoff between; the last conflict is raised.
    Inside an outer transaction nothing can be retried here (the outer one is broken): the conflict is raised
    for the outermost caller to retry."""
    for attempt in range(1, attempts + 1):
        try:
            return work()
        except DatabaseError as exc:
            if not is_conflict(exc) or attempt == attempts or connection.in_atomic_block:
                raise
            logger.warning("transaction rolled back for a conflict (%s), retry %s of %s", _sqlstate(exc), attempt,
                           attempts - 1)
            sleep(jitter(0, CONFLICT_BACKOFF_SECONDS * 2 ** (attempt - 1)))
    raise AssertionError("unreachable")


def _sqlstate(exc: BaseException) -> str:
    return next((e.sqlstate for e in _chain(exc) if getattr(e, "sqlstate", None)), "")


def drop_broken_connections() -> int:
    """Close this thread's connections that an error left unusable (outside a transaction); returns how many."""
    closed = 0
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or not conn.errors_occurred or conn.in_atomic_block:
            continue
        if conn.is_usable():
            conn.errors_occurred = False
            continue
        conn.close()
        closed += 1
    return closed


def check_writable(*, connection=connection) -> None:
    """Raise (a DatabaseError) unless the database (the default one) takes a write now: SQLite rewrites its
    user_version with the value it has (a committed write of one header page: a read-only or full file refuses it);
    PostgreSQL assigns a transaction id, which a read-only server or transaction refuses."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA user_version")
            version = int(cursor.fetchone()[0])
            cursor.execute(f"PRAGMA user_version = {version}")
        else:
            cursor.execute("SELECT txid_current()")
            cursor.fetchone()


def wait_until_writable(*, deadline: float, clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep) -> bool:
    """Wait (on this thread) until the database takes a write again, or `deadline` (by `clock`) passes; returns
    whether it does."""
    while True:
        drop_broken_connections()
        try:
            check_writable()
            return True
        except DatabaseError:
            if clock() >= deadline:
                return False
        sleep(RETRY_SECONDS)
