"""Rolling back a compaction restores exactly the pre-compaction history and window, records who and why, and
refuses a second rollback of the same boundary (design user story 5)."""

import json

from compaction_app.models import AuditEntry, Compaction
from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import project_rollout, verify_projection


def _json(items):
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"))


def test_rollback_restores_the_exact_history_and_window_before_the_compaction(
    make_session, add_turn, compact, support_api, support_user
):
    session = make_session(items=[])
    add_turn(session, 1)
    add_turn(session, 2)
    before_items = selectors.live_items(session=session)
    before_window = (session.window_number, session.window_id, session.previous_window_id, session.first_window_id)
    before_ref = session.reference_context_set
    compaction = compact(session, "local")
    assert selectors.live_items(session=session) != before_items

    response = support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "bad summary"}, format="json")

    assert response.status_code == 200, response.content
    session.refresh_from_db()
    assert _json(selectors.live_items(session=session)) == _json(before_items)
    assert (session.window_number, session.window_id, session.previous_window_id, session.first_window_id) == before_window
    assert session.reference_context_set == before_ref
    line = RolloutLine.objects.get(session=session, seq=response.json()["rollout_seq"])
    assert line.kind == "rollback" and line.actor == support_user
    assert line.payload["reason"] == "bad summary" and line.payload["actor"] == support_user.username
    assert line.payload["rolled_back_compaction"]["id"] == compaction.pk
    # the window state is a new record referring to the old window id; the compaction's window row stays
    reopened = ContextWindow.objects.filter(session=session, reason="rollback").get()
    assert reopened.window_id == before_window[1] and reopened.opened_by_seq == line.seq
    assert ContextWindow.objects.filter(session=session, window_id=compaction.window_id).exists()
    # token figures are recomputed for the restored history
    assert session.meter_history_tokens == sum(LiveItem.objects.filter(session=session).values_list("tokens", flat=True))
    assert session.tokens_in_window == response.json()["tokens_in_window"]
    assert verify_projection(session=session) == []
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is True
    entry = AuditEntry.objects.get(action="rollback")
    assert (entry.actor, entry.session_id, entry.compaction_id, entry.reason) == (
        support_user, session.pk, compaction.pk, "bad summary")


def test_rolling_back_an_earlier_compaction_undoes_the_later_ones_and_lists_them(
    make_session, add_turn, compact, support_api
):
    session = make_session()
    add_turn(session, 1)
    first = compact(session)
    add_turn(session, 2)
    second = compact(session)
    add_turn(session, 3)
    third = compact(session)
    assert project_rollout(session=session).header.compaction_count == 3

    preview = support_api.get(f"/api/v1/compactions/{second.pk}/rollback").json()
    assert [c["id"] for c in preview["undoes"]] == [third.pk]

    response = support_api.post(f"/api/v1/compactions/{first.pk}/rollback",
                                {"reason": "r", "expect_undoes": [third.pk, second.pk]}, format="json")

    assert response.status_code == 200
    assert [c["id"] for c in response.json()["undoes"]] == [second.pk, third.pk]
    assert set(Compaction.objects.filter(rolled_back=True).values_list("pk", flat=True)) == {first.pk, second.pk, third.pk}
    # the later ones are rolled back too: rolling them back again is refused
    again = support_api.post(f"/api/v1/compactions/{third.pk}/rollback", {"reason": "a test rollback"}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["message"].startswith(f"compaction {third.pk} is already rolled back")


def test_second_rollback_of_the_same_compaction_is_refused_with_a_clear_409(make_session, add_turn, compact, support_api):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    assert support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "a test rollback"}, format="json").status_code == 200
    lines = RolloutLine.objects.count()

    response = support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "again"}, format="json")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "already_rolled_back"
    assert error["message"].startswith(f"compaction {compaction.pk} is already rolled back")
    assert RolloutLine.objects.count() == lines
    assert AuditEntry.objects.filter(action="rollback").count() == 1


def test_items_added_after_the_compaction_are_undone_by_the_rollback_but_stay_in_the_rollout(
    make_session, add_turn, compact, support_api
):
    session = make_session()
    add_turn(session, 1)
    before = selectors.live_items(session=session)
    compaction = compact(session)
    add_turn(session, 2)
    late_seqs = list(RolloutLine.objects.filter(session=session, kind="response_item", seq__gt=compaction.rollout_seq)
                     .values_list("seq", flat=True))
    assert late_seqs

    support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "a test rollback"}, format="json")

    session.refresh_from_db()
    assert selectors.live_items(session=session) == before
    assert RolloutLine.objects.filter(session=session, seq__in=late_seqs).count() == len(late_seqs)


def test_a_rollback_while_the_session_is_busy_is_refused_and_changes_nothing(
    make_session, add_turn, compact, support_api, busy, rollout_rows
):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    lines = rollout_rows(session)
    with busy(session, "compaction"):
        response = support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "a test rollback"}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "busy"
    assert "busy" in response.json()["error"]["message"] and "compaction" in response.json()["error"]["message"]
    assert rollout_rows(session) == lines
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is False
    assert Session.objects.get(pk=session.pk).lease_holder == ""


def test_rollback_of_an_unknown_compaction_is_404(support_api, db):
    response = support_api.post("/api/v1/compactions/999999/rollback", {"reason": "a test rollback"}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
