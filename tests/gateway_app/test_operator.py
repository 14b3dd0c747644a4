"""Issue 29: an operator pauses a gateway session from its page; Codex's next request gets a clear error and
nothing is forwarded; resumed, requests go through again. Without the role, nothing changes."""

from __future__ import annotations

import pytest

from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewaySession
from gateway_app.operator import _paused
from sessions_app.models import Session
from tests.gateway_app.test_recording import Codex

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_paused_gateway_session_refuses_codexs_next_request_until_resumed(sim_upstream, route, client,
                                                                              operator_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("please fix parser bug 3")
    session = Session.objects.get(source="gateway")
    client.force_login(operator_user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="gateway-pause"' in page
    assert client.post(f"/gateway-sessions/{session.pk}/pause/").status_code == 302
    assert GatewaySession.objects.get().paused
    _paused.clear()
    before = len(sim_upstream.requests())
    refused = codex.post([*codex.history, {"type": "message", "role": "user",
                                           "content": [{"type": "input_text", "text": "go on"}]}])
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "session_paused" and "paused this session" in error["message"]
    assert len(sim_upstream.requests()) == before
    client.post(f"/gateway-sessions/{session.pk}/resume/")
    _paused.clear()
    codex.turn("go on")
    assert len(sim_upstream.requests()) == before + 1


def test_pausing_needs_the_operator_role(sim_upstream, route, client, make_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("hello")
    session = Session.objects.get(source="gateway")
    client.force_login(make_user(role=None))
    response = client.post(f"/gateway-sessions/{session.pk}/pause/")
    assert response.status_code in (302, 403)
    assert not GatewaySession.objects.get().paused
