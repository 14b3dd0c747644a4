"""Every turn ends (issue 42): a turn cut at any of its writes, by a database outage or by a conflict (a deadlock
the write's transaction lost), still ends in the rollout with an `error` line saying why and its `turn_complete`,
and the API answers 503 / 409, never a 500 nor a turn left open. The turn runs through `POST
/api/v1/sessions/<id>/turns` on a session over its limit, so its writes include a pre-turn compaction's install.
"""

from __future__ import annotations

from itertools import count

import psycopg.errors
import pytest
from django.db import OperationalError

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


CUTS = {"outage": (_outage, "the database became unavailable", 503),
        "conflict": (_deadlock, "a conflicting transaction rolled its write back", 409)}


def unended_turns(session) -> list[str]:
    started, ended = [], set()
    for payload in RolloutLine.objects.filter(session=session, kind="event_msg").order_by("seq").values_list(
            "payload", flat=True):
        if payload.get("type") == "turn_started":
            started.append(payload["turn_id"])
        elif payload.get("type") == "turn_complete":
            ended.add(payload["turn_id"])
    return [turn for turn in started if turn not in ended]


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_a_turn_cut_at_each_of_its_writes_ends_with_an_error_line_saying_why(
        operator_api, make_session, items_factory, monkeypatch, cut):
    make_error, why, answer = CUTS[cut]
    real_append = services.append_rollout_lines
    writes = {"seen": 0, "cut_at": 0}

    def append(**kwargs):
        writes["seen"] += 1
        if writes["seen"] == writes["cut_at"]:
            raise make_error()
        return real_append(**kwargs)

    monkeypatch.setattr(turn_port, "append_rollout_lines", append)
    monkeypatch.setattr(compaction_services, "append_rollout_lines", append)
    for cut_at in count(1):
        session = make_session(items=[items_factory.user("start"), items_factory.assistant(FILLER)])
        writes.update(seen=0, cut_at=cut_at)

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
        if writes["seen"] < cut_at:  # the turn made fewer writes: every one of them was cut once
            break
    assert cut_at > 3  # the turn's context, the compaction's install, the model's answers


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
