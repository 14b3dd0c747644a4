"""A snoozed or silenced alert is not open (issue 47, item 2): the alerts page's open list, the fleet board's card and
`GET /api/v1/alerts?state=open` agree, and the page lists it under "snoozed" instead."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from compaction_app.models import Alert
from tests.ui.test_live_pages import login


@pytest.mark.django_db
def test_a_snoozed_alert_is_not_listed_open_anywhere(operator_user, operator_api, make_session):
    looping, storming = make_session(title="looping"), make_session(title="storming")
    loop = Alert.objects.create(kind=Alert.Kind.LOOP, session=looping, message="the same call 5 times")
    streak = Alert.objects.create(kind=Alert.Kind.FAILURE_STREAK, session=storming, message="3 failures in a row")
    fleet = Alert.objects.create(kind=Alert.Kind.FLEET_STORM, message="12 compactions in 5 minutes")
    client = login(operator_user)

    response = client.post(reverse("alert_silence"), {"kind": "loop", "session": looping.pk, "minutes": 60})
    assert response.status_code == 302

    page = client.get(reverse("alerts")).content.decode()
    open_rows = {int(pk) for pk in re.findall(r'<tr data-alert="(\d+)"', page)}
    assert open_rows == {streak.pk, fleet.pk}
    board = client.get("/").content.decode()
    assert '<span id="alerts-count" class="badge outcome--failed">2 open</span>' in board
    assert f'data-alert="{loop.pk}"' not in board
    api_open = operator_api.get("/api/v1/alerts?state=open").json()
    assert sorted(a["id"] for a in api_open) == sorted([streak.pk, fleet.pk])

    snoozed = client.get(reverse("alerts") + "?state=snoozed").content.decode()
    assert f'<tr data-alert="{loop.pk}"' in snoozed and f'<tr data-alert="{streak.pk}"' not in snoozed
    assert '<option value="snoozed" selected>snoozed or silenced</option>' in snoozed
    assert [a["id"] for a in operator_api.get("/api/v1/alerts?state=snoozed").json()] == [loop.pk]
