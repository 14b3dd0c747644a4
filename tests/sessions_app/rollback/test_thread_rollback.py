"""Thread rollback by user turns through the API (spec §8.3)."""

from compaction_app.engine.items import is_user_turn_boundary
from compaction_app.models import AuditEntry
from sessions_app.codex_rollout import rollback_turns
from sessions_app.models import RolloutLine
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection


def test_num_turns_zero_is_refused_with_the_codex_message(make_session, add_turn, support_api):
    session = make_session()
    add_turn(session, 1)
    lines = RolloutLine.objects.count()

    response = support_api.post(f"/api/v1/sessions/{session.pk}/thread-rollback", {"num_turns": 0}, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == {"code": "thread_rollback_failed", "message": "num_turns must be >= 1"}
    assert RolloutLine.objects.count() == lines


def test_dropping_the_last_turns_keeps_everything_before_them(make_session, add_turn, support_api, support_user):
    session = make_session()
    add_turn(session, 1)
    kept = selectors.live_items(session=session)
    add_turn(session, 2)
    add_turn(session, 3)

    response = support_api.post(
        f"/api/v1/sessions/{session.pk}/thread-rollback", {"num_turns": 2, "reason": "wrong turn"}, format="json"
    )

    assert response.status_code == 200, response.content
    session.refresh_from_db()
    assert selectors.live_items(session=session) == kept
    line = RolloutLine.objects.get(session=session, seq=response.json()["rollout_seq"])
    assert line.kind == "rollback" and line.payload["source"] == "thread_rollback" and line.payload["num_turns"] == 2
    assert response.json()["removed_count"] == 4
    assert verify_projection(session=session) == []
    entry = AuditEntry.objects.get(action="thread_rollback")
    assert (entry.actor, entry.session_id, entry.reason, entry.detail["num_turns"]) == (
        support_user, session.pk, "wrong turn", 2)


def test_rolling_back_past_a_compaction_eats_into_its_replacement_history(
    make_session, add_turn, compact, support_api
):
    session = make_session()
    add_turn(session, 1)
    add_turn(session, 2)
    compact(session, "local")
    add_turn(session, 3)
    live = selectors.live_items(session=session)
    boundaries = sum(is_user_turn_boundary(i) for i in live)
    assert boundaries >= 3  # kept user messages + summary + the new turn

    response = support_api.post(f"/api/v1/sessions/{session.pk}/thread-rollback", {"num_turns": 2}, format="json")

    assert response.status_code == 200
    session.refresh_from_db()
    after = selectors.live_items(session=session)
    assert after == rollback_turns(live, 2)
    assert sum(is_user_turn_boundary(i) for i in after) == boundaries - 2
    assert verify_projection(session=session) == []


def test_a_history_without_user_turns_has_nothing_to_roll_back(make_session, support_api):
    session = make_session()
    lines = RolloutLine.objects.count()
    response = support_api.post(f"/api/v1/sessions/{session.pk}/thread-rollback", {"num_turns": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["error"] == {"code": "nothing_to_roll_back",
                                        "message": "the history has no user turn to roll back"}
    assert RolloutLine.objects.count() == lines


def test_thread_rollback_of_a_busy_session_is_refused(make_session, add_turn, support_api, busy):
    session = make_session()
    add_turn(session, 1)
    with busy(session, "turn"):
        response = support_api.post(f"/api/v1/sessions/{session.pk}/thread-rollback", {"num_turns": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "busy"
