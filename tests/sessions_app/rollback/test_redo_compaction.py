"""A rolled-back compaction can be redone exactly as it was, and only from the state its rollback produced."""

from compaction_app.models import AuditEntry, Compaction
from sessions_app.models import RolloutLine
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection


def test_redo_reinstalls_exactly_the_recorded_replacement_history_and_window(
    make_session, add_turn, compact, support_api, support_user
):
    session = make_session()
    add_turn(session, 1)
    add_turn(session, 2)
    compaction = compact(session, "local")
    after_items = selectors.live_items(session=session)
    after_window = (session.window_number, session.window_id, session.previous_window_id, session.first_window_id)
    after_ref = session.reference_context_set
    support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "try without"}, format="json")

    response = support_api.post(f"/api/v1/compactions/{compaction.pk}/redo", {"reason": "it was fine"}, format="json")

    assert response.status_code == 200, response.content
    session.refresh_from_db()
    assert selectors.live_items(session=session) == after_items
    assert (session.window_number, session.window_id, session.previous_window_id, session.first_window_id) == after_window
    assert session.reference_context_set == after_ref
    redo = RolloutLine.objects.get(session=session, seq=response.json()["rollout_seq"])
    compacted = RolloutLine.objects.get(session=session, seq=compaction.rollout_seq)
    assert redo.kind == "redo" and redo.payload["replacement_history"] == compacted.payload["replacement_history"]
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is False
    assert AuditEntry.objects.filter(action="redo", compaction=compaction, actor=support_user).count() == 1
    assert verify_projection(session=session) == []
    # redone means live again: it can be rolled back once more
    again = support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "a test rollback"}, format="json")
    assert again.status_code == 200


def test_redo_of_a_live_compaction_is_refused_with_409(make_session, add_turn, compact, support_api):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    lines = RolloutLine.objects.count()

    response = support_api.post(f"/api/v1/compactions/{compaction.pk}/redo", {}, format="json")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_rolled_back"
    assert response.json()["error"]["message"] == (
        f"compaction {compaction.pk} is not rolled back: it is live, so there is nothing to redo")
    assert RolloutLine.objects.count() == lines


def test_redo_after_the_history_moved_on_is_refused_and_says_why(make_session, add_turn, compact, support_api):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    rolled = support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "a test rollback"}, format="json").json()
    add_turn(session, 2)
    lines = RolloutLine.objects.count()

    response = support_api.post(f"/api/v1/compactions/{compaction.pk}/redo", {}, format="json")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "history_changed"
    assert f"changed since rollout line {rolled['rollout_seq']} rolled compaction {compaction.pk} back" in error["message"]
    assert RolloutLine.objects.count() == lines


def test_redo_while_the_session_is_busy_is_refused_with_409(make_session, add_turn, compact, support_api, busy):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "a test rollback"}, format="json")
    with busy(session, "turn"):
        response = support_api.post(f"/api/v1/compactions/{compaction.pk}/redo", {}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "busy"
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is True
