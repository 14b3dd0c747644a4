"""A deadlock or serialization failure is a conflict, not an outage (issue 42): on a running PostgreSQL, two
transactions that lock two rows in opposite orders deadlock for real; the one PostgreSQL rolls back is told apart
from a lost database (`is_conflict`, not `is_unavailable`) and `retry_on_conflict` runs it again, so both commit."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import OperationalError, connection, connections, transaction

from compactweb import db_outage
from sessions_app.models import Session

WAIT = 20  # seconds a thread waits for the other before the test gives up (a hang, not a timing figure)


@pytest.fixture
def two_rows(make_session) -> tuple[int, int]:
    """Two session rows for two transactions to lock in opposite orders (PostgreSQL only)."""
    if connection.vendor != "postgresql":
        pytest.skip("deadlocks are PostgreSQL's: checked in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    return make_session(title="one").pk, make_session(title="two").pk


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_deadlock_is_a_conflict_not_an_outage_and_its_transaction_is_retried_until_it_commits(two_rows):
    one, two = two_rows
    both_hold_one_row = threading.Barrier(2, timeout=WAIT)
    runs = {"a": 0, "b": 0}
    errors, conflicts = [], []

    def lock_in_order(name: str, first: int, second: int) -> None:
        runs[name] += 1
        with transaction.atomic():
            Session.objects.filter(pk=first).update(title=f"{name} first")
            if runs[name] == 1:  # the first run of each meets the other's: a real deadlock
                both_hold_one_row.wait()
            Session.objects.filter(pk=second).update(title=f"{name} second")

    def run(name: str, first: int, second: int) -> None:
        def noted(seconds: float) -> None:  # the real jittered wait, noted
            conflicts.append(name)
            time.sleep(seconds)

        try:
            db_outage.retry_on_conflict(lambda: lock_in_order(name, first, second), sleep=noted)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=("a", one, two)), threading.Thread(target=run, args=("b", two, one))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert errors == []
    assert conflicts  # PostgreSQL did pick a victim: it ran again, once per conflict, and committed
    assert sum(runs.values()) == 2 + len(conflicts)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_postgresql_deadlock_error_is_a_conflict_and_not_an_outage(two_rows):
    one, two = two_rows
    both = threading.Barrier(2, timeout=WAIT)
    raised: list[BaseException] = []

    def lock(first: int, second: int) -> None:
        try:
            with transaction.atomic():
                Session.objects.filter(pk=first).update(title="x")
                both.wait()
                Session.objects.filter(pk=second).update(title="y")
        except OperationalError as exc:
            raised.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=lock, args=(one, two)), threading.Thread(target=lock, args=(two, one))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert len(raised) == 1
    assert db_outage.is_conflict(raised[0]) and not db_outage.is_unavailable(raised[0])


@pytest.mark.django_db
def test_a_conflict_is_not_retried_inside_an_outer_transaction_and_a_lost_database_is_not_retried_at_all():
    calls = []

    def outage():
        calls.append("outage")
        raise OperationalError("server closed the connection unexpectedly")

    with pytest.raises(OperationalError):
        db_outage.retry_on_conflict(outage, sleep=lambda s: None)
    assert calls == ["outage"]
