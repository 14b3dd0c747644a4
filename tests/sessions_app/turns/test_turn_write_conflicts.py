"""A conflict in an ordinary turn write is retried, not a cut (issue 42): on a running PostgreSQL, a turn's write
that loses a real deadlock is run again (bounded and jittered, compactweb.db_outage.retry_on_conflict) and the
turn completes with its lines once, with no `error` line; only a conflict that outlasts the retries ends it
(tests/sessions_app/turns/test_cut_turns.py).

The deadlock, with real transactions on two connections: another transaction holds the turn's user row FOR UPDATE
(as an admin's edit of that user would); the turn's first write locks its session row and inserts its lines, whose
`actor` reference waits on that user row (KEY SHARE); the other transaction then asks for the session row. Each
waits on the other: PostgreSQL rolls one back, the turn's write (it waited first, so its deadlock check runs
first). The SQLite pass skips with that reason (SQLite has no row locks: one writer at a time).
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction

from sessions_app.models import RolloutLine, Session
from sessions_app.rollout.services import verify_projection

WAIT = 20  # seconds a thread waits for the other before the test gives up (a hang, not a timing figure)


def _blocking_others(cursor, pid: int) -> int:
    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [pid])
    return cursor.fetchone()[0]


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_turn_write_that_loses_a_real_deadlock_is_retried_and_the_turn_completes_once(
        operator_api, operator_user, make_session, caplog):
    if connection.vendor != "postgresql":
        pytest.skip("deadlocks are PostgreSQL's: checked in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    session = make_session(title="contended")
    holds_user, done = threading.Event(), threading.Event()
    other: dict = {}

    def the_other_transaction() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                get_user_model().objects.select_for_update().get(pk=operator_user.pk)
                cursor.execute("SELECT pg_backend_pid()")
                pid = cursor.fetchone()[0]
                holds_user.set()
                deadline = time.monotonic() + WAIT
                while not _blocking_others(cursor, pid):  # the turn's write now waits on the user row
                    assert time.monotonic() < deadline, "the turn's write never waited on the user row"
                    time.sleep(0.02)
                other["turn_waited"] = True
                # The session row the waiting write holds: a cycle, which PostgreSQL breaks by rolling one back.
                list(Session.objects.select_for_update().filter(pk=session.pk).values_list("pk", flat=True))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            other["error"] = exc
        finally:
            holds_user.set()
            done.set()
            connections.close_all()

    thread = threading.Thread(target=the_other_transaction)
    thread.start()
    assert holds_user.wait(WAIT)
    with caplog.at_level(logging.WARNING, logger="compactweb.db_outage"):
        response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "go on"}, format="json")
    assert done.wait(WAIT * 2)
    thread.join(WAIT)

    assert other.get("error") is None and other.get("turn_waited")  # the other one committed, after the cycle
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "completed", response.json()["error"]
    assert any("conflict (40P01)" in r.getMessage() for r in caplog.records)  # a real deadlock, and it was retried
    events = list(RolloutLine.objects.filter(session=session, kind="event_msg").order_by("seq")
                  .values_list("payload__type", flat=True))
    assert "error" not in events
    assert events.count("turn_started") == events.count("turn_complete") == 1
    seqs = list(RolloutLine.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert verify_projection(session=Session.objects.get(pk=session.pk)) == []
