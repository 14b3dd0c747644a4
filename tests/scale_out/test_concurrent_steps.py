"""Simulator steps of one session delivered to several workers at once on PostgreSQL (issue 8): exactly one runs
its turn, the others find the session busy and come back later; a compaction requested meanwhile is refused; the
rollout holds one turn, contiguous, equal to its rebuild."""

from __future__ import annotations

import time

import pytest

from sessions_app.compactions.services import do_compact_session
from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.rollout.lease import SessionBusy
from sessions_app.rollout.services import verify_projection
from tests.scale_out.at_once import AtOnce

STEPS = 8
# Each sampling request of the running step takes this long, far longer than the other steps need to try.
SLOW_SECONDS = 2
DEADLINE_SECONDS = 60


def turns_started(session_id: int) -> int:
    return sum(
        1 for payload in RolloutLine.objects.filter(session_id=session_id, kind="event_msg")
        .values_list("payload", flat=True) if payload.get("type") == "turn_started"
    )


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_concurrent_steps_of_one_session_run_one_turn_and_refuse_a_compaction_meanwhile(
    on_postgresql, provider, policy
):
    (run,) = fleet.do_start_fleet(provider=provider, policy=policy, scenario="many-short-turns", count=1)
    session_id = run.session_id
    Session.objects.filter(pk=session_id).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    lines_before = RolloutLine.objects.filter(session_id=session_id).count()
    steps = AtOnce(STEPS, lambda: fleet.do_run_step(session_id=session_id)).start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not Session.objects.filter(pk=session_id).exclude(lease_holder="").exists():
        assert time.monotonic() < deadline, "no step took the session's lease"
        time.sleep(0.02)
    with pytest.raises(SessionBusy, match="a turn is running"):
        do_compact_session(session_id=session_id, strategy="local")
    results = steps.join(DEADLINE_SECONDS)

    statuses = sorted(getattr(r, "status", repr(r)) for r in results)
    assert statuses == ["busy"] * (STEPS - 1) + ["ran"], results
    run.refresh_from_db()
    assert run.steps_done == 1 and run.last_error == ""
    assert turns_started(session_id) == 1
    seqs = list(RolloutLine.objects.filter(session_id=session_id).order_by("seq").values_list("seq", flat=True))
    assert len(seqs) > lines_before and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    session = Session.objects.get(pk=session_id)
    assert session.lease_holder == "" and not session.compactions.exists()
    assert SimulatorRun.objects.get(pk=run.pk).status == "running"
    assert verify_projection(session=session) == []
