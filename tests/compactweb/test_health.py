"""/healthz tells a load balancer whether the database, channel layer and broker answer, and nothing more."""

import pytest

from compactweb import health


@pytest.mark.django_db
def test_healthz_is_ok_on_the_embedded_default(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["channel_layer"] == "ok"
    assert body["checks"]["broker"].startswith("not configured")


@pytest.mark.django_db
def test_healthz_reports_503_naming_the_failing_dependency_without_details(client, monkeypatch):
    def broken():
        raise ConnectionRefusedError("redis://secret-host:6379 refused")

    monkeypatch.setitem(health.CHECKS, "channel_layer", broken)
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "failing"
    assert body["checks"]["channel_layer"] == "failing (ConnectionRefusedError)"
    assert "secret-host" not in response.content.decode()


@pytest.mark.django_db
def test_healthz_refuses_writes(client):
    assert client.post("/healthz").status_code == 405
