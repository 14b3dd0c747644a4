"""/metrics (issue 45): off until a scrape token is configured, then only for that token; it carries the /healthz
checks as gauges and the families of compactweb.metrics, with no session id in any label."""

from __future__ import annotations

import pytest

from compactweb import health
from tests.metrics_reading import TOKEN, scrape


@pytest.fixture
def token(settings):
    settings.COMPACTWEB_METRICS_TOKEN = TOKEN


@pytest.mark.django_db
def test_metrics_are_off_without_a_token_configured(client, settings):
    settings.COMPACTWEB_METRICS_TOKEN = ""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "metrics_off"


@pytest.mark.django_db
@pytest.mark.parametrize("header", [None, "Bearer wrong-token", f"Token {TOKEN}", f"Bearer {TOKEN}x", "Bearer "])
def test_metrics_refuse_a_scraper_without_the_token(client, token, header):
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    response = client.get("/metrics", **extra)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"compactweb_" not in response.content


@pytest.mark.django_db
def test_metrics_answer_only_get(client, token):
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.django_db
def test_metrics_carry_the_healthz_checks_as_dependency_gauges(client, token, monkeypatch):
    up = scrape(client)
    assert up.value("compactweb_dependency_up", dependency="database") == 1
    assert up.value("compactweb_dependency_up", dependency="channel_layer") == 1
    assert not up.has("compactweb_dependency_up", dependency="broker")  # not configured: no series

    def broken():
        raise ConnectionRefusedError("redis://secret-host:6379 refused")

    monkeypatch.setitem(health.CHECKS, "channel_layer", broken)
    down = scrape(client)
    assert down.value("compactweb_dependency_up", dependency="channel_layer") == 0
    assert down.value("compactweb_dependency_up", dependency="database") == 1
    assert "secret-host" not in down.text


@pytest.mark.django_db
def test_state_families_are_there_before_anything_happened(client, token):
    metrics = scrape(client)
    for kind in ("storm", "fleet_storm", "loop", "reread", "failure_streak"):
        assert metrics.has("compactweb_alerts_open", kind=kind)
        assert metrics.has("compactweb_alerts_raised_total", kind=kind)
    for kind in ("compaction", "replay", "import"):
        assert metrics.value("compactweb_jobs", kind=kind, status="queued") == 0
    assert metrics.value("compactweb_job_oldest_queued_age_seconds") == 0


@pytest.mark.django_db
def test_no_label_is_a_session_id_or_free_text(client, token):
    allowed = {"route", "endpoint", "mode", "status", "reason", "method", "trigger", "outcome", "kind", "dependency",
               "le"}
    metrics = scrape(client)
    for name, labels in metrics.samples:
        if name.startswith("compactweb_"):
            assert {key for key, _ in labels} <= allowed, name
