"""Alerts an operator keeps on (issue 32): `GET /api/v1/alerts` with filters and role checks, acknowledge, snooze and
silence per rule and per session (who and when kept), one alert that counts for repeats of one cause, a fleet storm
threshold that grows with the fleet, and for each rule a normal session that raises nothing."""

from __future__ import annotations

import pytest
from django.utils import timezone

from compaction_app.models import Alert, AlertSilence
from sessions_app.compactions import alerts
from sessions_app.models import Session
from tests.compaction_app.api.test_alerts import compact, settings

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast(no_engine_sleeps):
    """Retries wait no real time."""


def storm_in(api, session):
    settings(storm_count=1, storm_minutes=10)
    return [compact(api, session)["id"] for _ in range(2)]


def test_the_alerts_api_lists_with_filters_and_checks_the_role(operator_api, api_client_for, reader, make_session):
    storm_in(operator_api, reader)
    other = make_session(title="other")
    Alert.objects.create(kind="loop", session=other, message="a loop", last_at=timezone.now())
    everything = operator_api.get("/api/v1/alerts").json()
    assert {a["kind"] for a in everything} == {"storm", "loop"}
    storm = operator_api.get("/api/v1/alerts", {"kind": "storm"}).json()
    assert [a["session"] for a in storm] == [reader.pk] and storm[0]["count"] == 1 and len(storm[0]["compactions"]) == 2
    assert [a["kind"] for a in operator_api.get("/api/v1/alerts", {"session": other.pk}).json()] == ["loop"]
    bad = operator_api.get("/api/v1/alerts", {"kind": "nonsense"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid"
    assert api_client_for(None).get("/api/v1/alerts").status_code in (401, 403)


def test_acknowledging_records_who_and_when_and_a_new_raise_opens_a_new_alert(operator_api, operator_user, reader):
    # A failure streak (not a storm: an acknowledged storm stays quiet for its window, tested below).
    settings(failure_streak=1)
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    compact(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="failure_streak")
    answer = operator_api.post(f"/api/v1/alerts/{alert.pk}/acknowledge")
    assert answer.status_code == 200
    body = answer.json()
    assert body["acknowledged_by"] == operator_user.username and body["acknowledged_at"]
    assert operator_api.get("/api/v1/alerts", {"state": "open"}).json() == []
    assert operator_api.post("/api/v1/alerts/999999/acknowledge").status_code == 404
    # The same cause raised again: a new open alert, not a count on the acknowledged one.
    compact(operator_api, reader)
    (reopened,) = operator_api.get("/api/v1/alerts", {"state": "open"}).json()
    assert reopened["id"] != alert.pk and reopened["kind"] == "failure_streak" and reopened["count"] == 1
    assert reopened["acknowledged_at"] is None
    alert.refresh_from_db()
    assert alert.count == 1 and alert.acknowledged_by == operator_user


def test_an_acknowledged_storm_is_not_raised_again_within_its_window(operator_api, reader):
    storm_in(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="storm")
    assert operator_api.post(f"/api/v1/alerts/{alert.pk}/acknowledge").status_code == 200
    compact(operator_api, reader)
    assert list(Alert.objects.filter(kind="storm").values_list("pk", "count")) == [(alert.pk, 1)]


def test_repeats_of_one_cause_are_one_alert_that_counts(session):
    """A stuck session raising the loop rule four times: one alert, count 4 (not four alerts)."""
    from compaction_app.engine import alerts as rules

    limits = alerts.thresholds()
    from django.db import transaction

    for n in range(4):
        with transaction.atomic():
            alerts._raise([rules.Alert(kind=rules.AlertKind.LOOP, message=f"loop {n}")], session_id=session.pk,
                          limits=limits)
    (alert,) = Alert.objects.filter(kind="loop")
    assert alert.count == 4 and alert.message == "loop 3"


def test_a_snooze_or_silence_per_session_and_per_rule_holds_back_alerts(operator_api, operator_user, reader,
                                                                        make_session, support_api):
    silenced = operator_api.post("/api/v1/alerts/silences", {"kind": "storm", "session": reader.pk}, format="json")
    assert silenced.status_code == 201
    body = silenced.json()
    assert body["until"] is None and body["created_by"] == operator_user.username and body["created_at"]
    storm_in(operator_api, reader)
    assert not Alert.objects.filter(kind="storm").exists()
    # Lifted: the rule raises again.
    assert operator_api.delete(f"/api/v1/alerts/silences/{body['id']}").status_code == 204
    other = make_session(title="other")
    # A rule fleet-wide is the support role's (tests/compaction_app/api/test_alert_silence_scope.py).
    snoozed = support_api.post("/api/v1/alerts/silences", {"kind": "storm", "minutes": 30}, format="json").json()
    assert snoozed["until"] and snoozed["session"] is None
    storm_in(operator_api, other)
    assert not Alert.objects.filter(kind="storm").exists()  # the rule is snoozed fleet-wide
    AlertSilence.objects.filter(pk=snoozed["id"]).update(until=timezone.now())  # the snooze ran out
    compact(operator_api, other)
    assert Alert.objects.filter(kind="storm", session=other).exists()
    refused = operator_api.post("/api/v1/alerts/silences", {}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "silence a rule, a session, or a rule in a session"
    assert [s["id"] for s in operator_api.get("/api/v1/alerts/silences").json()] == []


def test_the_fleet_storm_threshold_grows_with_the_active_sessions():
    from compaction_app.engine.alerts import Thresholds

    limits = Thresholds(fleet_storm_count=30, fleet_storm_per_session=1.5)
    assert limits.fleet_storm_threshold(5) == 30
    assert limits.fleet_storm_threshold(20) == 30
    assert limits.fleet_storm_threshold(200) == 300


def test_a_fleet_of_sessions_each_compacting_once_is_no_storm(operator_api, make_session):
    settings(fleet_storm_count=3, fleet_storm_per_session=1.5, storm_count=3)
    from compaction_app.engine.items import user_message
    from tests.compaction_app.api.test_alerts import read_call

    fleet = [make_session(title=f"s{n}", items=[
        user_message("look"), read_call(f"c{n}", "src/a.py"),
        {"type": "function_call_output", "call_id": f"c{n}", "output": "x\n" * 400}, user_message("go on"),
    ]) for n in range(6)]
    for session in fleet:
        compact(operator_api, session)
    # Six compactions, over the absolute floor of 3, but 6 active sessions allow 9: no fleet storm, no storm.
    assert not Alert.objects.exists()
    for session in fleet[:4]:
        compact(operator_api, session)
    # Ten compactions by six sessions: over 9, a storm across the fleet (with its figures).
    (alert,) = Alert.objects.filter(kind="fleet_storm")
    assert alert.detail["active_sessions"] == 6 and alert.detail["threshold"] == 9


def test_normal_sessions_raise_no_storm_loop_or_failure_streak(operator_api, reader):
    settings(storm_count=3, failure_streak=3, loop_turns=2)
    compact(operator_api, reader)
    from sessions_app.models import Session

    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    compact(operator_api, reader)  # one failure is not a streak
    assert not Alert.objects.exists()
