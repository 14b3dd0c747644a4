"""The operator's controls where the operator is: pause / resume / stop answered with the control's new state (and
announced to every watching page), fault injection per session, redo from the inspector, stuck sessions marked on
the fleet board with a one-click recovery; every refusal answered with its reason."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from compaction_app.engine.stuck import stuck_reason
from compaction_app.models import AuditEntry, CompactionAttempt
from sessions_app.fleet.runtime import do_start_fleet
from sessions_app.live import render as live_render
from sessions_app.models import Job, Session


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def run(provider, policy):
    (run,) = do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy)
    return run


@pytest.fixture
def events(monkeypatch):
    sent = []
    monkeypatch.setattr("sessions_app.rollout.events.publish_transient", lambda **kw: sent.append(kw))
    return sent


@pytest.fixture
def submitted(monkeypatch, no_engine_sleeps):
    """The manual compactions asked for and not run: jobs handed to a runner when the request commits (not here)."""
    return Job.objects.filter(kind=Job.Kind.COMPACTION, status=Job.Status.QUEUED)


@pytest.mark.django_db
def test_pausing_from_the_fleet_answers_with_the_row_in_its_new_state_and_tells_every_page(operator_user, run,
                                                                                           events):
    response = login(operator_user).post(f"/sessions/{run.session_id}/run/pause/", HTTP_HX_REQUEST="true",
                                         HTTP_HX_TARGET=f"session-{run.session_id}")
    body = response.content.decode()
    assert response.status_code == 200 and f'id="session-{run.session_id}"' in body
    assert "state--paused" in body and ">Resume</button>" in body and ">Pause</button>" not in body
    assert [(e["session_id"], e["kind"]) for e in events] == [(run.session_id, "run.paused")]


@pytest.mark.django_db
def test_the_session_page_has_the_run_controls_and_a_click_answers_with_the_card(operator_user, run, events):
    client = login(operator_user)
    page = client.get(f"/sessions/{run.session_id}/").content.decode()
    assert 'id="run-controls"' in page and ">Pause</button>" in page
    response = client.post(f"/sessions/{run.session_id}/run/stop/", HTTP_HX_REQUEST="true",
                           HTTP_HX_TARGET="run-controls")
    assert 'data-run-status="stopped"' in response.content.decode()
    assert Session.objects.get(pk=run.session_id).state == "stopped"


@pytest.mark.django_db
def test_a_refused_run_control_says_why_as_text_and_swaps_nothing(operator_user, run, events):
    client = login(operator_user)
    client.post(f"/sessions/{run.session_id}/run/stop/", HTTP_HX_REQUEST="true")
    response = client.post(f"/sessions/{run.session_id}/run/resume/", HTTP_HX_REQUEST="true")
    assert response.status_code == 409 and response["HX-Reswap"] == "none"
    assert response["Content-Type"].startswith("text/plain") and "stopped" in response.content.decode()


@pytest.mark.django_db
def test_a_run_event_rerenders_the_session_head_and_run_card_for_watching_pages(run):
    html = live_render.session_transient(session_id=run.session_id, event={"kind": "run.paused", "after_seq": 0})
    assert 'id="session-head"' in html and 'id="run-controls"' in html and 'hx-swap-oob="true"' in html


@pytest.mark.django_db
def test_an_operator_switches_a_fault_on_for_one_session_and_it_is_audited(operator_user, session, make_session):
    other = make_session(title="other")
    response = login(operator_user).post(f"/sessions/{session.pk}/faults/", {"fault": "overloaded", "times": "2"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"Fault on: what it does is listed above." in response.content
    assert b"answers HTTP 429" in response.content and b"2 left" in response.content
    session.refresh_from_db()
    other.refresh_from_db()
    assert session.fault_injection["fault"].startswith("overloaded;times=2;key=s") and not other.fault_injection
    entry = AuditEntry.objects.get(action="fault_injection")
    assert entry.actor == operator_user and entry.session_id == session.pk


@pytest.mark.django_db
def test_clearing_the_fault_keeps_the_sessions_other_fault_settings(operator_user, make_session):
    session = make_session(fault_injection={"fault": "slow=2", "context_window": 9000})
    login(operator_user).post(f"/sessions/{session.pk}/faults/", {"fault": ""})
    session.refresh_from_db()
    assert session.fault_injection == {"context_window": 9000}


@pytest.mark.django_db
def test_a_bad_fault_form_is_refused_with_the_reason_and_changes_nothing(operator_user, session):
    response = login(operator_user).post(f"/sessions/{session.pk}/faults/", {"fault": "slow"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and b"need a number of seconds" in response.content
    session.refresh_from_db()
    assert not session.fault_injection and not AuditEntry.objects.filter(action="fault_injection").exists()


def test_only_a_failure_to_fit_the_window_makes_a_session_stuck():
    assert stuck_reason({"status": "failed", "error_kind": "context_window_exceeded"})
    assert stuck_reason({"status": "failed", "error_kind": "server_overloaded"}) is None
    assert stuck_reason({"status": "completed", "error_kind": ""}) is None
    assert stuck_reason(None) is None


@pytest.fixture
def stuck_session(make_session, items_factory):
    session = make_session(items=[items_factory.user("a long task " * 200)])
    CompactionAttempt.objects.create(
        session=session, trigger="auto", reason="context_limit", implementation="responses_compact",
        phase="pre_turn", strategy="remote_v1", status="failed", error_kind="context_window_exceeded",
        tokens_before=40_000, started_at=timezone.now(),
    )
    return session


@pytest.mark.django_db
def test_a_stuck_session_is_marked_on_the_fleet_board_with_both_recoveries(operator_user, stuck_session):
    body = login(operator_user).get("/").content.decode()
    row = body[body.index(f'id="session-{stuck_session.pk}"'):]
    assert f'data-stuck="{stuck_session.pk}"' in row and "Recover: summarise" in row and "New window" in row


@pytest.mark.django_db
def test_recovering_a_stuck_session_starts_a_local_compaction_and_answers_with_the_row(operator_user,
                                                                                       stuck_session, submitted):
    response = login(operator_user).post(f"/sessions/{stuck_session.pk}/recover/", {"method": "local"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"Recovery started" in response.content
    assert [(job.status, job.params["strategy"]) for job in submitted] == [("queued", "local")]


@pytest.mark.django_db
def test_an_unknown_recovery_is_refused_with_the_reason(operator_user, stuck_session, submitted):
    response = login(operator_user).post(f"/sessions/{stuck_session.pk}/recover/", {"method": "magic"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and b"Choose a recovery" in response.content and not submitted.exists()


@pytest.mark.django_db
def test_support_redoes_a_rolled_back_compaction_from_the_inspector(support_user, operator_user, make_session,
                                                                    items_factory, no_engine_sleeps):
    from sessions_app.compactions.rollback import do_rollback_compaction
    from sessions_app.compactions.services import do_compact_session

    session = make_session(items=[items_factory.user("x " * 300), items_factory.assistant("y " * 900)])
    compaction = do_compact_session(session_id=session.pk, strategy="local")
    do_rollback_compaction(compaction_id=compaction.pk, actor=support_user, reason="test")
    assert b'id="redo-form"' not in login(operator_user).get(f"/compactions/{compaction.pk}/").content
    client = login(support_user)
    assert b'id="redo-form"' in client.get(f"/compactions/{compaction.pk}/").content
    response = client.post(f"/compactions/{compaction.pk}/redo/", {"reason": "was fine"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Redirect"] == f"/compactions/{compaction.pk}/"
    again = client.post(f"/compactions/{compaction.pk}/redo/", {"reason": "twice"}, HTTP_HX_REQUEST="true")
    assert again.status_code == 409 and again["HX-Reswap"] == "none" and again.content
