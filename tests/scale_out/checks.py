"""What every fault test of the scale-out set checks at its end: nothing lost or doubled."""

from __future__ import annotations

from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.rollout.services import verify_projection


def assert_each_turn_once(session_ids) -> None:
    """Contiguous rollouts, each scenario step run once (one turn_started per turn), live projections equal to a
    rebuild, and every run stopped (none failed)."""
    for session_id in session_ids:
        seqs = list(RolloutLine.objects.filter(session_id=session_id).order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1)), f"session {session_id}: seqs not contiguous"
        contexts = RolloutLine.objects.filter(session_id=session_id, kind="turn_context", payload__has_key="step")
        steps = [line.payload["step"] for line in contexts.order_by("seq")]
        assert steps == list(range(len(steps))), f"session {session_id}: turns {steps}"
        started = [line.payload["turn_id"] for line in RolloutLine.objects.filter(
            session_id=session_id, kind="event_msg", payload__type="turn_started")]
        assert len(started) == len(set(started)) == len(steps), f"session {session_id}: a turn started twice"
        assert verify_projection(session=Session.objects.get(pk=session_id)) == []
    assert set(SimulatorRun.objects.filter(session_id__in=session_ids).values_list("status", flat=True)) == {
        SimulatorRun.Status.STOPPED}


def assert_every_turn_ended(session_ids) -> None:
    """Every `turn_started` has its `turn_complete` (issue 42): a turn a fault cut ended `interrupted`, after an
    `error` line saying why."""
    for session_id in session_ids:
        lines = RolloutLine.objects.filter(session_id=session_id, kind="event_msg",
                                           payload__type__in=["turn_started", "turn_complete", "error"])
        started, ended, errors = [], {}, {}
        for payload in lines.order_by("seq").values_list("payload", flat=True):
            kind, turn = payload["type"], payload.get("turn_id")
            if kind == "turn_started":
                started.append(turn)
            elif kind == "turn_complete":
                ended[turn] = payload.get("status")
            else:
                errors[turn] = payload.get("message", "")
        assert [t for t in started if t not in ended] == [], f"session {session_id}: a turn never ended"
        for turn, status in ended.items():
            if status == "interrupted":
                assert errors.get(turn, "").startswith("The turn was interrupted"), f"session {session_id}: {turn}"
