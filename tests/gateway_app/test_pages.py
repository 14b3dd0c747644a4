"""Issue 29: gateway sessions on the fleet board (marked, with the client and route), the session page, the
inspector and the export, like any session."""

from __future__ import annotations

import json

import pytest

from compaction_app.models import Compaction
from gateway_app.keys import do_create_gateway_key
from sessions_app.models import Session
from tests.gateway_app.test_recording import Codex

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_gateway_session_is_marked_on_the_fleet_board_and_works_in_the_inspector_and_export(
        sim_upstream, route, client, operator_user, api_client_for):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice-laptop").key)
    codex.turn("please fix parser bug 3")
    codex.turn()
    codex.compact_v2()
    codex.turn("now the docs")
    session = Session.objects.get(source="gateway")
    client.force_login(operator_user)
    fleet = client.get("/").content.decode()
    assert "alice-laptop via team-upstream-600" in fleet and "gateway as its model endpoint: client and route in the title\">gateway</span>" in fleet
    assert 'id="gateway-badge"' in client.get(f"/sessions/{session.pk}/").content.decode()
    compaction = Compaction.objects.get(session=session)
    inspector = client.get(f"/compactions/{compaction.pk}/")
    assert compaction.implementation == "responses_compaction_v2"
    assert inspector.status_code == 200 and compaction.get_implementation_display() in inspector.content.decode()
    exported = api_client_for(operator_user).get(f"/api/v1/sessions/{session.pk}/export")
    assert exported.status_code == 200
    lines = [json.loads(x) for x in b"".join(exported.streaming_content).decode().splitlines()]
    assert lines[0]["type"] == "session_meta" and lines[0]["payload"]["id"] == str(session.thread_id)
    assert [x["type"] for x in lines].count("compacted") == 1
