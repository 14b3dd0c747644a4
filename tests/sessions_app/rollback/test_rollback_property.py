"""Property: random sessions with several compactions, random rollbacks and redos. After every step the live
history equals a rebuild from the rollout, equals the recorded pre-compaction (or post-compaction) state where it
should, the rollout only grew, and refusals happen exactly when the model of the rules says so."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction_app.models import Compaction
from sessions_app.compactions.rollback import RollbackRefused, do_redo_compaction, do_rollback_compaction
from sessions_app.models import RolloutLine
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection

STEP = st.one_of(
    st.tuples(st.just("turn"), st.integers(1, 60)),
    st.tuples(st.just("compact"), st.sampled_from(["remote_v1", "local", "token_budget"])),
    st.tuples(st.just("rollback"), st.integers(0, 20)),
    st.tuples(st.just("redo"), st.integers(0, 20)),
)


class Model:
    """What the rules say: each compaction's states, whether it is rolled back, and what its last rollback
    installed."""

    def __init__(self):
        self.compactions: list[dict] = []

    def later_live(self, index):
        return [c for c in self.compactions[index + 1:] if not c["rolled_back"]]


def _rows(session):
    return list(RolloutLine.objects.filter(session=session).order_by("seq").values_list("seq", "kind", "payload"))


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=3, max_size=9))
def test_rollbacks_and_redos_keep_history_equal_to_the_rollout_and_to_the_recorded_states(
    make_session, add_turn, compact, steps
):
    session = make_session()
    add_turn(session, 0)
    model = Model()
    rows = _rows(session)
    for number, step in enumerate(steps, start=1):
        kind = step[0]
        if kind == "turn":
            add_turn(session, number, size=step[1])
        elif kind == "compact":
            before = selectors.live_items(session=session)
            compaction = compact(session, step[1])
            model.compactions.append({"row": compaction, "before": before, "after": selectors.live_items(session=session),
                                      "rolled_back": False, "produced": None})
        elif kind == "rollback" and model.compactions:
            index = step[1] % len(model.compactions)
            target = model.compactions[index]
            if target["rolled_back"]:
                try:
                    do_rollback_compaction(compaction_id=target["row"].pk)
                    raise AssertionError("a second rollback of the same compaction must be refused")
                except RollbackRefused as exc:
                    assert exc.code == "already_rolled_back"
            else:
                undone = model.later_live(index)
                result = do_rollback_compaction(compaction_id=target["row"].pk, reason="property")
                assert [c.pk for c in result.undoes] == [c["row"].pk for c in undone]
                session.refresh_from_db()
                live = selectors.live_items(session=session)
                assert live == target["before"]  # the recorded pre-compaction state, item for item
                for c in [target, *undone]:
                    c["rolled_back"], c["produced"] = True, live
        elif kind == "redo" and model.compactions:
            target = model.compactions[step[1] % len(model.compactions)]
            allowed = target["rolled_back"] and selectors.live_items(session=session) == target["produced"]
            try:
                do_redo_compaction(compaction_id=target["row"].pk)
            except RollbackRefused as exc:
                assert not allowed, exc
                assert exc.code == ("history_changed" if target["rolled_back"] else "not_rolled_back")
            else:
                assert allowed
                target["rolled_back"], target["produced"] = False, None
                session.refresh_from_db()
                assert selectors.live_items(session=session) == target["after"]
        session.refresh_from_db()
        assert verify_projection(session=session) == []
        now = _rows(session)
        assert len(now) >= len(rows) and now[: len(rows)] == rows  # the rollout only grew
        rows = now
        cached = dict(Compaction.objects.filter(session=session).values_list("pk", "rolled_back"))
        assert cached == {c["row"].pk: c["rolled_back"] for c in model.compactions}
