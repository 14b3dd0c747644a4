"""Concurrent compactions never deadlock on PostgreSQL (issue 42): a session's transaction locks its own Session row
and no shared configuration row, so a roll-up write never waits on a policy row another session holds.

The deadlock this replays, with real concurrent transactions on two connections: compaction A plans (its
transaction locks session A; the old `select_related("provider", "policy")` FOR UPDATE locked the shared policy
row too) while session B's transaction has upserted a roll-up row and inserts an attempt that references the
policy (KEY SHARE, which waits for that FOR UPDATE); A then upserts the same roll-up row. Old code: policy row
against roll-up row, PostgreSQL's "deadlock detected" (40P01) kills one of them. The SQLite pass skips with that
reason (SQLite has no row locks: one writer at a time).
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
from django.db import connection, connections, transaction

from compaction_app import records, rollup
from compaction_app.models import CompactionAttempt
from sessions_app.compactions import services
from sessions_app.rollout.lease import session_lease
from tests.source_ast import parse_source

WAIT = 20  # seconds a thread waits for the other's step before the test gives up (a hang, not a timing figure)


def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's: checked in the PostgreSQL pass (DATABASE_URL=postgres://...)")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_compaction_plan_and_a_rollup_write_with_a_policy_reference_on_another_session_both_commit(
        make_session, monkeypatch):
    _postgresql_only()
    session_a, session_b, session_c = (make_session(title=t) for t in "ABC")
    assert session_a.policy_id == session_b.policy_id == session_c.policy_id  # the shared configuration row
    # The roll-up row A's plan upserts: the one a plan of a session like it (C) adds to, read back as a share.
    with session_lease(session_id=session_c.pk, purpose="compaction") as lease:
        planned = services._plan(lease=lease, session_id=session_c.pk, ask=services.MANUAL)
    share = rollup.attempt_shares(ids=[planned.attempt_id])
    a_locked, b_holds_rollup = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    real_start = records.start_attempt

    def start_after_b(**kwargs):  # A's plan: its session is locked; B now holds the roll-up row A upserts
        a_locked.set()
        assert b_holds_rollup.wait(WAIT)
        return real_start(**kwargs)

    def plan_a():
        try:
            with session_lease(session_id=session_a.pk, purpose="compaction") as lease:
                services._plan(lease=lease, session_id=session_a.pk, ask=services.MANUAL)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            a_locked.set()
            connections.close_all()

    def write_b():
        try:
            assert a_locked.wait(WAIT)
            with transaction.atomic():
                rollup.apply(share)  # the roll-up row A's plan adds to (no reference to the policy)
                b_holds_rollup.set()
                # Then a row referencing the policy (an attempt, a compaction, an audit entry all do).
                real_start(session=session_b, item_id="b1", turn_id="t", trigger="manual",
                           reason="user_requested", implementation="local", phase="standalone_turn",
                           strategy="local", tokens_before=0)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            b_holds_rollup.set()
            connections.close_all()

    monkeypatch.setattr(records, "start_attempt", start_after_b)
    threads = [threading.Thread(target=plan_a), threading.Thread(target=write_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert CompactionAttempt.objects.filter(session=session_a).count() == 1
    assert CompactionAttempt.objects.filter(session=session_b).count() == 1


APPS = ("compaction_app", "sessions_app", "gateway_app", "compactweb")


def _chain(call: ast.Call) -> list[ast.Call]:
    """The calls of a method chain, outermost first: `a.b().c().d()` -> [d(), c(), b()]."""
    calls = []
    node: ast.AST = call
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        calls.append(node)
        node = node.func.value
    return calls


def test_no_query_locks_the_rows_it_joins():
    """Every `select_for_update` whose query joins (select_related) names the rows it locks (`of=`): without it
    PostgreSQL locks each joined row too, e.g. the policy and provider rows every session shares."""
    root = Path(__file__).resolve().parents[3]
    found = set()
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            for node in ast.walk(parse_source(path)):
                if not isinstance(node, ast.Call):
                    continue
                calls = _chain(node)
                names = {c.func.attr: c for c in calls}
                lock = names.get("select_for_update")
                if lock is not None and "select_related" in names and not any(k.arg == "of" for k in lock.keywords):
                    found.add(f"{path.relative_to(root)}:{node.lineno}")
    assert sorted(found) == []
