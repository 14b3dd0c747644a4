"""Issue 45: what compactions, alerts, turns, simulator steps and jobs do shows on /metrics, read back as a
scraper reads it after real actions through the JSON API (the embedded default: one process, its own registry)."""

from __future__ import annotations

import pytest

from compaction_app.models import Alert, AlertSettings, Compaction
from sessions_app.fleet import runtime as fleet
from sessions_app.models import Job, Session
from tests.metrics_reading import TOKEN, scrape

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _token(settings, no_engine_sleeps):
    settings.COMPACTWEB_METRICS_TOKEN = TOKEN


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Run what the request's transaction registered for its commit (counting happens only once it commits)."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def compact(api, session, strategy="local"):
    return api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": strategy}, format="json")


def alert_settings(**values) -> None:
    row = AlertSettings.current()
    for key, value in values.items():
        setattr(row, key, value)
    row.save()


def test_an_api_compaction_is_counted_by_method_trigger_and_outcome_with_its_duration_and_tokens(
        client, operator_api, reader, committed):
    labels = {"method": "local", "trigger": "manual", "outcome": "completed"}
    before = scrape(client)
    with committed():
        response = compact(operator_api, reader)
    assert response.status_code == 201, response.content
    after = scrape(client)
    made = Compaction.objects.get(pk=response.json()["id"])

    def grew(name, **labels):
        return after.value(name, **labels) - before.value(name, **labels)

    assert grew("compactweb_compaction_attempts_total", **labels) == 1
    assert grew("compactweb_compaction_duration_seconds_count", method="local") == 1
    assert grew("compactweb_compaction_tokens_before_count", method="local") == 1
    assert grew("compactweb_compaction_tokens_before_sum", method="local") == made.tokens_before
    assert grew("compactweb_compaction_tokens_after_sum", method="local") == made.tokens_after
    assert grew("compactweb_compaction_freed_tokens_total", method="local") == made.tokens_before - made.tokens_after
    assert made.tokens_before > made.tokens_after
    assert grew("compactweb_compaction_call_tokens_total", method="local") == made.call_tokens > 0
    assert grew("compactweb_compaction_probe_tokens_total", method="local") == made.probe_tokens
    assert made.retention_score is not None  # a local summary is scored structurally as it is installed
    assert grew("compactweb_compaction_retention_score_count", method="local") == 1
    assert grew("compactweb_compaction_retention_score_sum", method="local") == pytest.approx(made.retention_score)


def test_a_failed_compaction_is_counted_as_failed_and_installs_nothing(client, operator_api, reader, committed):
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    before = scrape(client)
    with committed():
        assert compact(operator_api, reader).status_code == 502
    after = scrape(client)
    failed = {"method": "local", "trigger": "manual", "outcome": "failed"}
    assert after.value("compactweb_compaction_attempts_total", **failed) - before.value(
        "compactweb_compaction_attempts_total", **failed) == 1
    assert after.value("compactweb_compaction_tokens_before_count", method="local") == before.value(
        "compactweb_compaction_tokens_before_count", method="local")


def test_alerts_raised_and_open_by_kind_follow_the_storm_and_its_acknowledgement(client, operator_api, reader):
    alert_settings(storm_count=1, storm_minutes=10)
    compact(operator_api, reader)
    compact(operator_api, reader)
    raised = scrape(client)
    assert raised.value("compactweb_alerts_open", kind="storm") == 1
    assert raised.value("compactweb_alerts_raised_total", kind="storm") == 1
    assert raised.value("compactweb_alerts_open", kind="loop") == 0

    (alert,) = Alert.objects.filter(kind="storm")
    assert operator_api.post(f"/api/v1/alerts/{alert.pk}/acknowledge").status_code == 200
    acknowledged = scrape(client)
    assert acknowledged.value("compactweb_alerts_open", kind="storm") == 0
    assert acknowledged.value("compactweb_alerts_raised_total", kind="storm") == 1


def test_a_snoozed_alert_is_not_open_on_metrics_as_on_the_alerts_page(client, operator_api, support_api, reader):
    alert_settings(storm_count=1, storm_minutes=10)
    compact(operator_api, reader)
    compact(operator_api, reader)
    assert scrape(client).value("compactweb_alerts_open", kind="storm") == 1
    # A rule fleet-wide is the support role's (issue 42).
    snoozed = support_api.post("/api/v1/alerts/silences", {"kind": "storm", "minutes": 30}, format="json")
    assert snoozed.status_code == 201, snoozed.content
    metrics = scrape(client)
    assert metrics.value("compactweb_alerts_open", kind="storm") == 0
    assert metrics.value("compactweb_alerts_open", kind="storm") == len(
        operator_api.get("/api/v1/alerts?state=open").json())
    assert metrics.value("compactweb_alerts_raised_total", kind="storm") == 1


def test_an_api_turn_is_counted_by_outcome(client, operator_api, session):
    before = scrape(client)
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "hello"}, format="json")
    assert response.status_code in (200, 201), response.content
    after = scrape(client)
    assert after.value("compactweb_turns_total", outcome="completed") - before.value(
        "compactweb_turns_total", outcome="completed") == 1


def test_simulator_steps_are_counted_by_outcome(client, operator_api, provider, policy):
    response = operator_api.post("/api/v1/fleet", {"scenario": "many-short-turns", "count": 1,
                                                   "provider": provider.pk, "policy": policy.pk}, format="json")
    assert response.status_code == 201, response.content
    session_id = response.json()["runs"][0]["session"]
    before = scrape(client)
    assert fleet.do_run_step(session_id=session_id).status == "ran"
    after = scrape(client)
    assert after.value("compactweb_simulator_steps_total", outcome="ran") - before.value(
        "compactweb_simulator_steps_total", outcome="ran") == 1
    assert after.value("compactweb_turns_total", outcome="completed") > before.value(
        "compactweb_turns_total", outcome="completed")


def test_queued_and_running_jobs_are_counted_with_the_oldest_ones_age(client, reader):
    Job.objects.create(kind=Job.Kind.COMPACTION, session=reader, params={"trigger": "manual", "strategy": "local"})
    Job.objects.create(kind=Job.Kind.REPLAY, status=Job.Status.RUNNING, session=reader)
    Job.objects.create(kind=Job.Kind.IMPORT, status=Job.Status.SUCCEEDED)
    metrics = scrape(client)
    assert metrics.value("compactweb_jobs", kind="compaction", status="queued") == 1
    assert metrics.value("compactweb_jobs", kind="replay", status="running") == 1
    assert metrics.value("compactweb_jobs", kind="import", status="queued") == 0
    assert not metrics.has("compactweb_jobs", kind="import", status="succeeded")
    assert metrics.value("compactweb_job_oldest_queued_age_seconds") >= 0
    assert metrics.has("compactweb_job_oldest_queued_age_seconds")
