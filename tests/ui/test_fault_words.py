"""Fault injection in words (issue 33 item 4): the session page says what each injected fault does, which requests
it hits (the session's turns and compactions alike, or compactions only when a scenario scoped it), how many it
has left and when it last fired; a recovery asked for while a fault hits it, and a compaction that failed because
of one, say so."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from compaction_app.models import CompactionAttempt
from sessions_app.fleet.runtime import do_start_fleet
from sessions_app.models import Session


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def fault_panel(client: Client, session: Session) -> str:
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    return page[page.index('id="fault-active"'):page.index("</form>", page.index('id="fault-active"'))]


@pytest.mark.django_db
def test_an_injected_fault_is_described_in_words_without_its_header_syntax(operator_user, session):
    client = login(operator_user)
    answer = client.post(f"/sessions/{session.pk}/faults/", {"fault": "server_error", "times": "3"},
                         HTTP_HX_REQUEST="true").content.decode()
    assert "Fault on: what it does is listed above." in answer
    panel = fault_panel(client, session)
    assert "<strong>Server error</strong>: answers HTTP 500 (internal server error) instead of a reply." in panel
    assert "Hits its turns and its compactions alike: streamed /responses requests (turns, local summaries)" in panel
    assert "remote v1 compaction requests (/responses/compact)" in panel
    assert "the next 3 requests it applies to" in panel and "3 left · not fired yet" in panel
    assert "times=" not in panel and "key=" not in panel  # no header syntax, no internal key
    assert re.search(r"up to \d+ stream retr", panel)


@pytest.mark.django_db
def test_a_fault_that_fired_shows_how_often_when_and_how_many_are_left(operator_user, operator_api, make_session,
                                                                        items_factory, no_engine_sleeps):
    session = make_session(items=[items_factory.user("fix the parser " * 30), items_factory.assistant("done")])
    client = login(operator_user)
    client.post(f"/sessions/{session.pk}/faults/", {"fault": "overloaded", "times": "1"})
    compacted = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json")
    assert compacted.status_code == 201, compacted.content  # the one overloaded answer was absorbed by a retry
    assert compacted.json()["attempts"][0]["retries"] == 1
    panel = fault_panel(client, session)
    assert "0 left · fired 1 time, last" in panel


@pytest.mark.django_db
def test_a_fault_a_scenario_scoped_to_compactions_says_it_hits_compactions_only(operator_user, provider, policy):
    (run,) = do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy)
    Session.objects.filter(pk=run.session_id).update(fault_injection={"fault": "v2_zero"})
    run.state = {**run.state, "fault_scope": "compaction"}
    run.save(update_fields=["state"])
    panel = fault_panel(login(operator_user), run.session)
    assert "Hits its compactions only (its scenario scoped the fault to them): remote v2 compaction requests" in panel
    assert "every request it applies to, until cleared" in panel


@pytest.mark.django_db
def test_a_compaction_failed_by_the_fault_says_so_on_the_session_page(operator_user, operator_api, make_session,
                                                                       items_factory, no_engine_sleeps):
    session = make_session(items=[items_factory.user("fix the parser " * 30), items_factory.assistant("done")])
    client = login(operator_user)
    client.post(f"/sessions/{session.pk}/faults/", {"fault": "server_error"})
    failed = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json")
    assert failed.status_code == 502
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert ("This failure is the injected fault (server error): it hits this session&#x27;s compaction requests. "
            "Clear it under Fault injection, then recover.") in page
    fleet = client.get("/").content.decode()
    assert 'data-fault-blame title="This failure is the injected fault (server error)' in fleet
    client.post(f"/sessions/{session.pk}/faults/", {"fault": ""})
    assert "data-fault-blame" not in client.get(f"/sessions/{session.pk}/").content.decode()


@pytest.mark.django_db
def test_a_recovery_asked_for_while_a_fault_hits_it_says_it_will_fail(operator_user, make_session, items_factory,
                                                                       no_engine_sleeps):
    session = make_session(items=[items_factory.user("a long task " * 200)],
                           fault_injection={"fault": "context_window_exceeded"})
    CompactionAttempt.objects.create(
        session=session, trigger="auto", reason="context_limit", implementation="responses_compact",
        phase="pre_turn", strategy="remote_v1", status="failed", error_kind="context_window_exceeded",
        tokens_before=40_000, started_at=timezone.now(),
    )
    client = login(operator_user)
    summarise = client.post(f"/sessions/{session.pk}/recover/", {"method": "local"}, HTTP_HX_REQUEST="true",
                            HTTP_HX_TARGET="compaction-status").content.decode()
    assert ("An injected fault (context window exceeded) is on for this session and hits this recovery&#x27;s "
            "model call: it will fail while the fault lasts.") in summarise


@pytest.mark.django_db
def test_with_a_broker_the_firings_are_not_claimed_from_this_process(operator_user, make_session, settings):
    session = make_session(fault_injection={"fault": "overloaded;times=2;key=k"})
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/9"  # requests run on workers: their simulators count
    panel = fault_panel(login(operator_user), session)
    assert "counted by the workers that send the requests, not shown here" in panel
    assert "not fired yet" not in panel and "left ·" not in panel
