"""A session's next own-lease turn in the process that ran its last one starts from the copy that turn left
(`turns.caches.idle_sessions`): no read before its first write, which takes the lease and checks, under the row
lock, that the rollout, the lease and the configuration are what the copy says. Any change, through any path,
makes the turn read the session again and start over, having written nothing."""

from __future__ import annotations

import pytest

from compaction_app.models import CompactionPolicy, Provider
from sessions_app.models import RolloutLine, Session
from sessions_app.turns import caches
from sessions_app.turns import services as turns

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def make_session(make_session):
    """A new session, with no copy left under its id by an earlier test's session (ids are reused between tests;
    such a copy would be refused at the first write, as it should, but the reads below count it)."""

    def make(**kwargs):
        session = make_session(**kwargs)
        caches.idle_sessions.take(session.pk)
        return session

    return make


def _turn(operator_api, session, text: str) -> dict:
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": text}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def _started_windows(session) -> list[int]:
    return [payload["model_context_window"] for payload in RolloutLine.objects.filter(
        session=session, kind="event_msg", payload__type="turn_started").order_by("seq").values_list(
        "payload", flat=True)]


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """How each turn read its session before starting: "read" (no lease), "leased" (the lease taken the usual
    way, after a first write refused the session as read)."""
    seen: list[str] = []
    load, acquire = turns._load_for_turn, turns._acquire_and_load

    def reading(**kwargs):
        seen.append("read")
        return load(**kwargs)

    def leasing(**kwargs):
        seen.append("leased")
        return acquire(**kwargs)

    monkeypatch.setattr(turns, "_load_for_turn", reading)
    monkeypatch.setattr(turns, "_acquire_and_load", leasing)
    return seen


def test_a_sessions_next_turn_in_the_same_process_starts_without_reading_it(operator_api, make_session, reads):
    session = make_session()

    _turn(operator_api, session, "first")
    _turn(operator_api, session, "second")

    assert reads == ["read"]  # the first turn read it; the second started from the copy the first left
    users = [p["content"][0]["text"] for p in RolloutLine.objects.filter(
        session=session, kind="response_item", payload__role="user").order_by("seq").values_list("payload", flat=True)]
    assert users == ["first", "second"]
    assert Session.objects.filter(pk=session.pk, lease_holder="").exists()


@pytest.mark.parametrize("edit", ["provider", "policy", "session"])
def test_a_configuration_changed_between_turns_by_any_path_is_what_the_next_turn_runs_with(
        operator_api, make_session, reads, edit):
    session = make_session()
    _turn(operator_api, session, "first")
    # Queryset updates: no save(), no signal, no auto_now; the check compares what the database holds.
    if edit == "provider":
        Provider.objects.filter(pk=session.provider_id).update(context_window=64_000)
    elif edit == "policy":
        CompactionPolicy.objects.filter(pk=session.policy_id).update(auto_compact_token_limit=10)
    else:
        Session.objects.filter(pk=session.pk).update(base_instructions="Answer in French.")

    data = _turn(operator_api, session, "second")

    assert reads == ["read", "leased"]  # the copy was refused at the first write; the turn read it again
    windows = _started_windows(session)
    if edit == "provider":
        assert windows[1] > windows[0]  # the second turn ran on the new window
    elif edit == "policy":
        assert data["compactions"] and data["compactions"][0]["phase"] == "pre_turn"  # the new limit applied
    else:
        assert data["status"] == "completed"
    kinds = list(RolloutLine.objects.filter(session=session, kind="event_msg", payload__type="turn_started")
                 .values_list("seq", flat=True))
    assert len(kinds) == 2  # the refused start wrote nothing


def test_a_turn_that_read_its_session_again_leaves_its_copy_for_the_next(operator_api, make_session, reads):
    session = make_session()
    _turn(operator_api, session, "first")
    Session.objects.filter(pk=session.pk).update(base_instructions="Answer in French.")

    _turn(operator_api, session, "second")
    _turn(operator_api, session, "third")

    assert reads == ["read", "leased"]  # the third started from the copy the second left, edit included


def test_a_line_appended_between_turns_is_in_the_next_turns_request(make_session, items_factory):
    from sessions_app.rollout.services import do_append_items
    from tests.sessions_app.turns.test_turn_writes import _LeaseWatcher

    session = make_session()
    client = _LeaseWatcher(session.pk)  # keeps each request's input
    turns.run_turn(session_id=session.pk, user_input="first", client=client)
    do_append_items(session=Session.objects.get(pk=session.pk), items=[items_factory.user("a note from elsewhere")])

    turns.run_turn(session_id=session.pk, user_input="second", client=client)

    sent = [i["content"][0]["text"] for i in client.inputs[-1] if i.get("role") == "user"]
    assert sent[-3:] == ["first", "a note from elsewhere", "second"]
    users = [p["content"][0]["text"] for p in RolloutLine.objects.filter(
        session=session, kind="response_item", payload__role="user").order_by("seq").values_list("payload", flat=True)]
    assert users == ["first", "a note from elsewhere", "second"]
