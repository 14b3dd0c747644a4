"""Alerts live on the fleet board and the session page (issue 32): an alert raised, grown or acknowledged reaches a
watching page over the websocket as the alerts card's list and count, out of band (the card's collapsed state,
which the list swap leaves alone, is the reader's); the pages render the same partial first, collapsible and with
a bounded height; acknowledge and silence work from the card and from the alerts page."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.utils import timezone

from compaction_app.engine import alerts as rules
from compaction_app.models import Alert, AlertSilence
from sessions_app.compactions import alerts

pytestmark = pytest.mark.django_db(transaction=True)


def raise_loop(session_id: int, message: str = "usage back above the limit") -> None:
    from django.db import transaction

    with transaction.atomic():
        alerts._raise([rules.Alert(kind=rules.AlertKind.LOOP, message=message)], session_id=session_id,
                      limits=alerts.thresholds())


async def text_of(comm, timeout: float = 10) -> str:
    message = await comm.receive_output(timeout)
    assert message["type"] == "websocket.send", message
    return message["text"]


@pytest.mark.asyncio
@pytest.mark.parametrize("page", ["/ws/fleet/", "/ws/sessions/{id}/"])
async def test_a_raised_alert_reaches_the_watching_page_without_a_reload(ws_for, operator_user, session, page):
    comm = await ws_for(operator_user, page.format(id=session.pk))
    ok, _ = await comm.connect(timeout=10)
    assert ok
    if "sessions" in page:
        await text_of(comm)  # the hello
    await database_sync_to_async(raise_loop)(session.pk, "loop <b>one</b>")
    html = await text_of(comm)
    assert 'id="alerts-list" hx-swap-oob="true"' in html and 'id="alerts-count" class="badge outcome--failed"' in html
    assert "1 open" in html and "loop &lt;b&gt;one&lt;/b&gt;" in html
    await database_sync_to_async(raise_loop)(session.pk, "loop again")
    html = await text_of(comm)
    assert "×2" in html and "loop again" in html  # one alert that counts, not a second one
    await comm.disconnect()


@pytest.mark.asyncio
async def test_a_fleet_storm_reaches_a_watching_session_page_whose_card_lists_it(ws_for, operator_user, session):
    # The session page's card lists the fleet's storms beside the session's own alerts: their count is live there
    # too (issue 47: a live counter is live or absent), not only on the fleet board.
    def storm(message: str) -> None:
        from django.db import transaction

        with transaction.atomic():
            alerts._raise([rules.Alert(kind=rules.AlertKind.FLEET_STORM, message=message)], session_id=session.pk,
                          limits=alerts.thresholds())

    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    ok, _ = await comm.connect(timeout=10)
    assert ok
    await text_of(comm)  # the hello
    await database_sync_to_async(storm)("12 compactions across the fleet in 5 minutes")
    html = await text_of(comm)
    assert 'id="alerts-list" hx-swap-oob="true"' in html and "12 compactions across the fleet" in html
    await database_sync_to_async(storm)("13 compactions across the fleet in 5 minutes")
    assert "×2" in await text_of(comm)
    await comm.disconnect()


def test_the_pages_render_the_collapsible_bounded_alerts_card(operator_user, session):
    raise_loop(session.pk)
    client = Client()
    client.force_login(operator_user)
    for url in ("/", f"/sessions/{session.pk}/"):
        body = client.get(url).content.decode()
        card = body[body.index('id="fleet-alerts"'):]
        assert '<details open class="alerts-details">' in card and 'id="alerts-list"' in card
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "compactweb.css").read_text()
    assert ".alerts-card ul.alerts { max-height: 9.5rem; overflow-y: auto;" in css
    fleet = client.get("/").content.decode()
    # The alerts card sits above the fleet table yet cannot grow it off the screen: its list scrolls.
    assert fleet.index('id="fleet-alerts"') < fleet.index('id="fleet-table"')


def test_acknowledge_and_silence_from_the_card_and_the_alerts_page(operator_user, session):
    raise_loop(session.pk)
    alert = Alert.objects.get(kind="loop")
    client = Client()
    client.force_login(operator_user)
    page = client.get("/alerts/").content.decode()
    assert f'data-alert="{alert.pk}"' in page and "Snoozes and silences" in page
    answer = client.post(f"/alerts/{alert.pk}/acknowledge/", {"scope": str(session.pk)}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200 and "0 open" in answer.content.decode()
    alert.refresh_from_db()
    assert alert.acknowledged_by == operator_user and alert.acknowledged_at is not None
    acknowledged = client.get("/alerts/?state=acknowledged").content.decode()
    assert f'data-alert="{alert.pk}"' in acknowledged and operator_user.username in acknowledged
    silenced = client.post("/alerts/silence/", {"kind": "loop", "session": session.pk, "minutes": 30})
    assert silenced.status_code == 302
    silence = AlertSilence.objects.get()
    assert silence.created_by == operator_user and silence.until > timezone.now()
    raise_loop(session.pk)
    assert Alert.objects.filter(kind="loop").count() == 1  # snoozed: not raised again
    bad = client.post("/alerts/silence/", {"kind": "nonsense"}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 400 and "Not silenced" in bad.content.decode()
    assert client.post(f"/alerts/silences/{silence.pk}/lift/").status_code == 302
    assert not AlertSilence.objects.exists()


def test_the_alerts_pages_need_the_operator_role(norole_user, session):
    client = Client()
    assert client.get("/alerts/").status_code in (302, 403)
    client.force_login(norole_user)
    assert client.get("/alerts/").status_code == 403
    assert client.post("/alerts/silence/", {"kind": "loop"}).status_code == 403
