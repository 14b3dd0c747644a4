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


@pytest.mark.django_db
def test_an_acknowledged_storm_is_not_raised_again_while_another_rules_alert_of_its_session_is_open(
        operator_api, reader):
    """Only an open alert of the storm itself (which the raise would bring up to date) lets the storm raise again
    in its window: a loop alert open in the same session does not."""
    from django.db import transaction
    from django.utils import timezone

    from compaction_app.engine import alerts as rules
    from sessions_app.compactions import alerts

    settings(storm_count=1, storm_minutes=10, fleet_storm_count=1000)
    compact(operator_api, reader), compact(operator_api, reader)
    Alert.objects.filter(kind="storm").update(acknowledged_at=timezone.now())
    with transaction.atomic():
        alerts._raise([rules.Alert(kind=rules.AlertKind.LOOP, message="loop")], session_id=reader.pk,
                      limits=alerts.thresholds())
    compact(operator_api, reader)
    assert Alert.objects.filter(kind="storm").count() == 1
    assert Alert.objects.filter(kind="loop", acknowledged_at__isnull=True).count() == 1


@pytest.mark.django_db
def test_an_acknowledged_storm_is_not_raised_again_while_an_alert_of_it_too_old_to_update_is_open(
        operator_api, reader):
    """A storm alert left open past the grouping window is not one the raise would bring up to date (it opens a
    new alert instead), so it does not stand for the storm being open: the acknowledged one within the storm's
    window keeps the storm quiet."""
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.compactions import alerts

    settings(storm_count=1, storm_minutes=10, fleet_storm_count=1000)
    now = timezone.now()
    stale = Alert.objects.create(kind="storm", session=reader, message="an old storm",
                                 last_at=now - timedelta(minutes=alerts.GROUP_MINUTES + 1))
    Alert.objects.filter(pk=stale.pk).update(created_at=now - timedelta(minutes=alerts.GROUP_MINUTES + 1))
    Alert.objects.create(kind="storm", session=reader, message="acknowledged", last_at=now, acknowledged_at=now)
    compact(operator_api, reader), compact(operator_api, reader)
    assert Alert.objects.filter(kind="storm").count() == 2
