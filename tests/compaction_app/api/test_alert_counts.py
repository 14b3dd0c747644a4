"""An open storm alert follows the storm (issue 46): its count and message are brought up to date at every raise,
through the compact API, without a second alert; the fleet storm's message states the full count, not the number
of compactions the alert links."""

from __future__ import annotations

import pytest

from compaction_app.models import Alert, AlertSettings


def settings(**values) -> None:
    row = AlertSettings.current()
    for key, value in values.items():
        setattr(row, key, value)
    row.save()


def compact(api, session) -> dict:
    response = api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.django_db
def test_an_open_storm_alert_counts_every_raise_and_its_message_says_how_many_compactions(operator_api, reader):
    settings(storm_count=1, storm_minutes=10, fleet_storm_count=1000)
    for _ in range(6):
        compact(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="storm")
    assert alert.count == 5  # raised at compactions 2 to 6, one alert
    assert alert.message.startswith("compaction storm: 6 compactions in 10 minutes")
    assert alert.detail["count"] == 6
    response = operator_api.get("/api/v1/alerts")
    assert response.status_code == 200
    (listed,) = [a for a in response.json() if a["kind"] == "storm"]
    assert listed["count"] == 5 and "6 compactions" in listed["message"]


@pytest.mark.django_db
def test_an_acknowledged_storm_is_not_raised_again_within_its_window(operator_api, reader):
    settings(storm_count=1, storm_minutes=10, fleet_storm_count=1000)
    compact(operator_api, reader), compact(operator_api, reader)
    from django.utils import timezone

    Alert.objects.filter(kind="storm").update(acknowledged_at=timezone.now())
    compact(operator_api, reader)
    assert Alert.objects.filter(kind="storm").count() == 1


@pytest.mark.django_db
def test_the_fleet_storm_message_states_every_compaction_not_only_the_linked_ones(operator_api, reader):
    settings(storm_count=1000, fleet_storm_count=2, fleet_storm_per_session=0.1, fleet_storm_minutes=10)
    for _ in range(7):
        compact(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="fleet_storm")
    assert alert.message.startswith("compaction storm: 7 compactions in 10 minutes across the fleet")
    assert alert.count == 5  # raised at compactions 3 to 7
    assert alert.compactions.count() == 3  # the evidence linked: the first compactions past the threshold
