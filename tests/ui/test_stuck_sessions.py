"""Stuck sessions (issue 17), brought about through the JSON API against the simulated model: each overflow
situation is marked stuck on the fleet board and on the session page (the compaction status partial, so it
follows live updates), with the recoveries that can still help; a recovery clicked on the session page answers
with the status box."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.live import render as live_render
from sessions_app.models import Job, Session


@pytest.fixture
def submitted(monkeypatch):
    """The manual compactions asked for and not run: jobs handed to a runner when the request commits (not here)."""
    return Job.objects.filter(kind=Job.Kind.COMPACTION, status=Job.Status.QUEUED)


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def session_with(make_session, items_factory, words: int) -> Session:
    # the test provider's window is 32,000 tokens (30,400 usable); one word is about one token
    return make_session(items=[items_factory.user("word " * words), items_factory.assistant("ok")])


def compact(api, session, method: str) -> int:
    return api.post(f"/api/v1/sessions/{session.pk}/compact", {"method": method}, format="json").status_code


def status_box(user, session) -> str:
    body = login(user).get(f"/sessions/{session.pk}/").content.decode()
    return body[body.index('id="compaction-status"'):body.index('id="fault-form"')]


def fleet_row(user, session) -> str:
    body = login(user).get("/").content.decode()
    row = body[body.index(f'id="session-{session.pk}"'):]
    return row[:row.index("</tr>")]


def recoveries(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('data-recover="')[1:]]


@pytest.mark.django_db
def test_a_history_over_the_window_is_stuck_after_remote_compaction_fails(
    operator_api, operator_user, make_session, items_factory, no_engine_sleeps
):
    session = session_with(make_session, items_factory, 36_000)
    assert compact(operator_api, session, "remote_v2") == 502  # the model refuses the whole history

    box = status_box(operator_user, session)
    assert f'data-stuck="{session.pk}"' in box and "context window exceeded" in box
    assert recoveries(box) == ["local", "token_budget"] == recoveries(fleet_row(operator_user, session))


@pytest.mark.django_db
def test_local_summarisation_that_ran_out_of_room_leaves_only_a_new_window(
    operator_api, operator_user, make_session, items_factory, no_engine_sleeps
):
    session = session_with(make_session, items_factory, 2_000)
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": "context_window_exceeded"})
    assert compact(operator_api, session, "local") == 502  # trimmed to one item, which still does not fit

    box = status_box(operator_user, session)
    assert "trimmed everything it could" in box and recoveries(box) == ["token_budget"]
    assert recoveries(fleet_row(operator_user, session)) == ["token_budget"]


@pytest.mark.django_db
def test_a_compaction_that_left_the_history_over_the_usable_window_is_stuck(
    operator_api, operator_user, make_session, items_factory, no_engine_sleeps
):
    session = session_with(make_session, items_factory, 31_000)
    assert compact(operator_api, session, "remote_v2") == 201  # remote v2 keeps the 31k-token user message

    box = status_box(operator_user, session)
    assert "more than the usable window of 30,400" in box and recoveries(box) == ["local", "token_budget"]


@pytest.mark.django_db
def test_a_session_under_its_window_is_not_stuck(operator_api, operator_user, make_session, items_factory,
                                                 no_engine_sleeps):
    session = session_with(make_session, items_factory, 2_000)
    assert compact(operator_api, session, "local") == 201
    assert "data-stuck" not in status_box(operator_user, session)
    assert "data-stuck" not in fleet_row(operator_user, session)


@pytest.mark.django_db
def test_the_stuck_state_follows_live_updates_of_the_session_page(operator_api, make_session, items_factory,
                                                                  no_engine_sleeps):
    session = session_with(make_session, items_factory, 36_000)
    seq = Session.objects.get(pk=session.pk).last_seq
    compact(operator_api, session, "remote_v2")

    html, _ = live_render.session_batch(session_id=session.pk, after_seq=seq)  # what watching pages receive
    status = html[html.index('id="compaction-status"'):]
    assert f'data-stuck="{session.pk}"' in status and 'hx-swap-oob="true"' in html


@pytest.mark.django_db
def test_a_recovery_clicked_on_the_session_page_answers_with_the_status_box(
    operator_api, operator_user, make_session, items_factory, no_engine_sleeps, submitted
):
    session = session_with(make_session, items_factory, 36_000)
    compact(operator_api, session, "remote_v2")

    response = login(operator_user).post(f"/sessions/{session.pk}/recover/", {"method": "token_budget"},
                                         HTTP_HX_REQUEST="true", HTTP_HX_TARGET="compaction-status")
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<div id="compaction-status"')
    assert "Recovery started: start a new window" in body
    assert [(job.status, job.params["strategy"]) for job in submitted] == [("queued", "token_budget")]


@pytest.mark.django_db
def test_without_javascript_a_recovery_returns_to_the_page_it_came_from(
    operator_api, operator_user, make_session, items_factory, no_engine_sleeps, submitted
):
    session = session_with(make_session, items_factory, 36_000)
    compact(operator_api, session, "remote_v2")
    response = login(operator_user).post(f"/sessions/{session.pk}/recover/",
                                         {"method": "local", "next": f"/sessions/{session.pk}/"})
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"
