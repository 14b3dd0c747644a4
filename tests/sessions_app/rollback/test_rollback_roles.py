"""Only support staff (and admins) may roll back or redo: operators get 403, anonymous callers 401."""

import pytest

from sessions_app.models import RolloutLine


@pytest.fixture
def rolled_session(make_session, add_turn, compact):
    session = make_session()
    add_turn(session, 1)
    return session, compact(session)


def _calls(session, compaction):
    return [
        ("post", f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "x"}),
        ("get", f"/api/v1/compactions/{compaction.pk}/rollback", None),
        ("post", f"/api/v1/compactions/{compaction.pk}/redo", {}),
        ("post", f"/api/v1/sessions/{session.pk}/thread-rollback", {"num_turns": 1}),
    ]


@pytest.mark.parametrize("index", range(4))
def test_operator_cannot_roll_back_and_nothing_changes(rolled_session, operator_api, index):
    method, url, body = _calls(*rolled_session)[index]
    lines = RolloutLine.objects.count()
    response = getattr(operator_api, method)(url, body, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert "This needs the support role." in response.json()["error"]["message"]
    assert RolloutLine.objects.count() == lines


@pytest.mark.parametrize("index", range(4))
def test_anonymous_callers_get_401(rolled_session, anon_api, index):
    method, url, body = _calls(*rolled_session)[index]
    response = getattr(anon_api, method)(url, body, format="json")
    assert response.status_code == 401


def test_admin_role_may_roll_back(rolled_session, admin_api):
    _, compaction = rolled_session
    assert admin_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "a test rollback"}, format="json").status_code == 200
