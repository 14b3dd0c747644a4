"""Every turn ends (issue 42): a turn cut at any of its writes, by a database outage or by a conflict (a deadlock
the write's transaction lost), still ends in the rollout with an `error` line saying why and its `turn_complete`,
and the API answers 503 / 409, never a 500 nor a turn left open. The turn runs through `POST
/api/v1/sessions/<id>/turns` on a session over its limit, so its writes include a pre-turn compaction's install.
A conflict is a cut only when it outlasts its retries: one that fails a write once is retried and the turn
completes (tests/sessions_app/turns/test_turn_write_conflicts.py has it with a real PostgreSQL deadlock).
"""

from __future__ import annotations

from itertools import count

import psycopg.errors
import pytest
from django.db import OperationalError

from compactweb import db_outage
from sessions_app.compactions import services as compaction_services
from sessions_app.models import RolloutLine
from sessions_app.rollout import services
from sessions_app.turns import port as turn_port

pytestmark = pytest.mark.django_db

FILLER = "Ledger entries are posted per currency, reconciled nightly and audited weekly. " * 2100


def _outage() -> Exception:
    return OperationalError("database is locked")  # SQLite's busy database: an outage (compactweb/db_outage)


def _deadlock() -> Exception:
    # What Django's PostgreSQL backend raises for a transaction PostgreSQL chose as a deadlock's victim.
    try:
        raise psycopg.errors.DeadlockDetected("deadlock detected")
    except psycopg.errors.DeadlockDetected as cause:
        try:
            raise OperationalError("deadlock detected") from cause
        except OperationalError as exc:
            return exc


# How a cut write fails: an outage once (never retried), a conflict at every one of its retries (one that outlasts
# them); a conflict that fails the write once is retried and cuts nothing (the next test).
CUTS = {"outage": (_outage, 1, "the database became unavailable", 503),
        "conflict": (_deadlock, db_outage.CONFLICT_ATTEMPTS, "a conflicting transaction rolled its write back", 409)}


def unended_turns(session) -> list[str]:
    started, ended = [], set()
    for payload in RolloutLine.objects.filter(session=session, kind="event_msg").order_by("seq").values_list(
            "payload", flat=True):
        if payload.get("type") == "turn_started":
            started.append(payload["turn_id"])
        elif payload.get("type") == "turn_complete":
            ended.add(payload["turn_id"])
    return [turn for turn in started if turn not in ended]


def _cut_writes(monkeypatch, make_error) -> dict:
    """Make the turn's and the compaction's `cut_at`-th write fail `left` times (a retry is the same write)."""
    real_append = services.append_rollout_lines
    writes = {"seen": 0, "reached": 0, "cut_at": 0, "left": 0}

    def append(**kwargs):
        index = writes["seen"] + 1
        writes["reached"] = max(writes["reached"], index)
        if index == writes["cut_at"] and writes["left"] > 0:
            writes["left"] -= 1
            raise make_error()  # not counted as seen: its retry, if any, is the same write
        writes["seen"] = index
        return real_append(**kwargs)

    monkeypatch.setattr(turn_port, "append_rollout_lines", append)
    monkeypatch.setattr(compaction_services, "append_rollout_lines", append)
    monkeypatch.setattr(db_outage.time, "sleep", lambda seconds: None)  # the jittered waits: not waited here
    return writes


# Transactional: a conflict is retried only outside an outer transaction, and the test's own would be one.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("cut", sorted(CUTS))
def test_a_turn_cut_at_each_of_its_writes_ends_with_an_error_line_saying_why(
        operator_api, make_session, items_factory, monkeypatch, cut):
    make_error, times, why, answer = CUTS[cut]
    writes = _cut_writes(monkeypatch, make_error)
    for cut_at in count(1):
        session = make_session(items=[items_factory.user("start"), items_factory.assistant(FILLER)])
        writes.update(seen=0, reached=0, cut_at=cut_at, left=times)

        response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "next"}, format="json")

        assert response.status_code in (200, answer), (cut_at, response.status_code, response.content)
        assert unended_turns(session) == [], cut_at
        ends = list(RolloutLine.objects.filter(session=session, kind="event_msg", payload__type="turn_complete")
                    .values_list("payload", flat=True))
        started = RolloutLine.objects.filter(session=session, kind="event_msg", payload__type="turn_started").exists()
        if response.status_code == answer and started:  # cut after its first lines: ended as interrupted
            assert ends and ends[-1]["status"] == "interrupted"
            error = RolloutLine.objects.filter(session=session, kind="event_msg", payload__type="error").last()
            assert error.payload["codex_error_info"] == "turn_interrupted" and why in error.payload["message"]
            assert error.payload["turn_id"] == ends[-1]["turn_id"]
        assert started or not ends  # cut at its first write: nothing of it was recorded
        assert services.verify_projection(session=session) == []
        if writes["reached"] < cut_at:  # the turn made fewer writes: every one of them was cut once
            break
    assert cut_at > 3  # the turn's context, the compaction's install, the model's answers


@pytest.mark.django_db(transaction=True)
def test_a_conflict_at_any_one_write_of_a_turn_is_retried_and_the_turn_completes(
        operator_api, make_session, items_factory, monkeypatch):
    writes = _cut_writes(monkeypatch, _deadlock)
    for cut_at in count(1):
        session = make_session(items=[items_factory.user("start"), items_factory.assistant(FILLER)])
        writes.update(seen=0, reached=0, cut_at=cut_at, left=1)

        response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "next"}, format="json")

        assert response.status_code == 200, (cut_at, response.content)
        assert response.json()["status"] == "completed", (cut_at, response.json()["error"])
        assert writes["left"] == 0 or writes["reached"] < cut_at, cut_at  # it did conflict (or made no such write)
        assert unended_turns(session) == [], cut_at
        kinds = list(RolloutLine.objects.filter(session=session, kind="event_msg").values_list("payload__type",
                                                                                                flat=True))
        assert "error" not in kinds and kinds.count("turn_started") == kinds.count("turn_complete") == 1, cut_at
        assert services.verify_projection(session=session) == []
        if writes["reached"] < cut_at:
            break
    assert cut_at > 3


def test_the_turn_of_a_holder_that_died_is_ended_by_the_next_turn_before_it_starts(operator_api, make_session):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import Session
    from sessions_app.rollout import lease as locks

    session = make_session()
    # A worker took the lease, wrote its turn's first lines, and was killed (kill -9: nothing ran after).
    dead = locks.acquire(session_id=session.pk, purpose="turn")
    real_append = services.append_rollout_lines
    real_append(session=Session.objects.get(pk=session.pk), lines=[services.NewLine(
        "event_msg", {"type": "turn_started", "turn_id": "dead-turn", "model_context_window": 1000})])
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert unended_turns(session) == ["dead-turn"] and dead.holder

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "next"}, format="json")

    assert response.status_code == 200, response.content
    assert unended_turns(session) == []
    lines = list(RolloutLine.objects.filter(session=session, kind="event_msg").order_by("seq")
                 .values_list("payload", flat=True))
    types = [(line["type"], line.get("turn_id")) for line in lines]
    dead_end = types.index(("turn_complete", "dead-turn"))
    assert types[dead_end - 1] == ("error", "dead-turn")
    assert "lease expired" in lines[dead_end - 1]["message"] and lines[dead_end]["status"] == "interrupted"
    assert dead_end < types.index(("turn_started", response.json()["turn_id"]))


def test_the_lease_reaper_ends_the_turn_of_a_holder_that_died(make_session):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import Session
    from sessions_app.rollout import lease as locks

    session = make_session()
    locks.acquire(session_id=session.pk, purpose="turn")
    services.append_rollout_lines(session=Session.objects.get(pk=session.pk), lines=[services.NewLine(
        "event_msg", {"type": "turn_started", "turn_id": "dead-turn", "model_context_window": 1000})])
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    assert locks.reap_expired() == [session.pk]

    assert unended_turns(session) == []
    assert services.verify_projection(session=session) == []


def test_a_turn_that_raises_after_its_lease_was_taken_over_ends_not_the_takers_turn(make_session, monkeypatch):
    """The turn's own end of a cut turn (`turns/services._end_cut_turn`) is written only while its lease is its
    own: the taker ended the cut turn with the takeover, and the open turn is then the taker's, still live."""
    from datetime import timedelta

    from asgiref.sync import async_to_sync, sync_to_async
    from django.utils import timezone

    from sessions_app.models import Session
    from sessions_app.rollout import lease as locks
    from sessions_app.turns import services as turns
    from sessions_app.turns.loop import EVENT_MSG, Marker

    session = make_session()
    lease = locks.acquire(session_id=session.pk, purpose="turn")
    taker = {}

    def taken_over() -> None:
        Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        taker["lease"] = locks.acquire(session_id=session.pk, purpose="turn")  # ends the cut turn (holder_lost)
        services.append_rollout_lines(session=Session.objects.get(pk=session.pk), lines=[services.NewLine(
            "event_msg", {"type": "turn_started", "turn_id": "takers-turn", "model_context_window": 1000})])

    async def loop(*, port, turn_id, **kwargs):
        await port.record([Marker(EVENT_MSG, {"type": "turn_started", "turn_id": turn_id,
                                              "model_context_window": 1000})])
        await sync_to_async(taken_over)()
        raise RuntimeError("the turn raised after its lease was taken over")

    monkeypatch.setattr(turns, "run_turn_loop", loop)

    with pytest.raises(RuntimeError):
        async_to_sync(turns.arun_turn)(session_id=session.pk, user_input="next", turn_id="cut-turn", lease=lease,
                                       session=Session.objects.select_related("provider", "policy").get(pk=session.pk))

    ends = [(p["turn_id"], p["status"]) for p in RolloutLine.objects.filter(
        session=session, kind="event_msg", payload__type="turn_complete").order_by("seq").values_list("payload",
                                                                                                      flat=True)]
    assert ends == [("cut-turn", "interrupted")]  # ended once, by the taker; the taker's turn is its own to end
    assert unended_turns(session) == ["takers-turn"]


def test_a_turn_whose_lease_was_taken_over_writes_nothing_more_after_the_taker_ended_it(make_session, monkeypatch):
    """A turn's writer still running when the taker of its lease wrote its interrupted end: its next write (here
    its own `turn_complete`) checks the lease under the row lock, writes nothing and raises LeaseLost, so the turn
    has one end."""
    from datetime import timedelta

    from asgiref.sync import async_to_sync, sync_to_async
    from django.utils import timezone

    from sessions_app.models import Session
    from sessions_app.rollout import lease as locks
    from sessions_app.turns import services as turns
    from sessions_app.turns.loop import EVENT_MSG, Marker, turn_complete_marker

    session = make_session()
    lease = locks.acquire(session_id=session.pk, purpose="turn")

    def taken_over() -> None:
        Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        locks.acquire(session_id=session.pk, purpose="turn")  # ends the turn as the dead holder's (holder_lost)

    async def loop(*, port, turn_id, **kwargs):
        await port.record([Marker(EVENT_MSG, {"type": "turn_started", "turn_id": turn_id,
                                              "model_context_window": 1000})])
        await sync_to_async(taken_over)()
        try:
            await port.record([turn_complete_marker(turn_id, "completed", "")])
        except locks.LeaseLost as exc:
            raised.append(exc)
            raise

    monkeypatch.setattr(turns, "run_turn_loop", loop)
    raised = []

    with pytest.raises(Exception):  # noqa: B017 - what it is, is asserted below, after what was written
        async_to_sync(turns.arun_turn)(session_id=session.pk, user_input="next", turn_id="slow-turn", lease=lease,
                                       session=Session.objects.select_related("provider", "policy").get(pk=session.pk))

    ends = [(p["turn_id"], p["status"]) for p in RolloutLine.objects.filter(
        session=session, kind="event_msg", payload__type="turn_complete").order_by("seq").values_list("payload",
                                                                                                      flat=True)]
    assert ends == [("slow-turn", "interrupted")]
    assert len(raised) == 1  # the write refused with LeaseLost
    assert services.verify_projection(session=session) == []


@pytest.mark.django_db(transaction=True)
def test_a_cut_turn_whose_end_the_database_refused_keeps_its_lease_until_a_taker_ends_it(
        operator_api, make_session, items_factory, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import Session
    from sessions_app.turns import services as turn_services

    writes = _cut_writes(monkeypatch, _outage)
    writes.update(cut_at=2, left=1)  # the turn's first lines are written, its next write meets the outage
    monkeypatch.setattr(turn_services, "end_open_turn", lambda **kwargs: (_ for _ in ()).throw(_outage()))
    session = make_session(items=[items_factory.user("start")])

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "next"}, format="json")

    assert response.status_code == 503, response.content
    cut = unended_turns(session)
    assert len(cut) == 1
    # Given back free, nobody would ever end that turn: the lease stays until it expires and its taker ends it.
    assert Session.objects.get(pk=session.pk).lease_holder
    monkeypatch.undo()
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "again"}, format="json")

    assert response.status_code == 200, response.content
    assert unended_turns(session) == []
    ended = RolloutLine.objects.filter(session=session, kind="event_msg", payload__type="turn_complete",
                                       payload__turn_id=cut[0]).values_list("payload__status", flat=True)
    assert list(ended) == ["interrupted"]
