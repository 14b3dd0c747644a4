"""Issue 44: what compactweb decides for a Claude Code session through the Anthropic gateway reaches its
requests as it reaches Codex's (gateway_app.steering, docs/gateway.md "Operator actions"): an operator's
"compact at the next request", support's rollback of a compaction, pins once; and compactweb mode's own
failures and triggers are said right. Each through the gateway's HTTP path, the upstream a recording simulated
model that speaks the Messages API."""

from __future__ import annotations

import json

import pytest

from compaction_app.models import Compaction, CompactionPolicy
from gateway_app import anthropic_compaction
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayAttempt
from sessions_app.models import Session
from tests.gateway_app.test_anthropic_gateway import Claude, claude_route

pytestmark = pytest.mark.django_db(transaction=True)


def test_compactweb_modes_own_failure_is_a_500_api_error_without_the_exceptions_text(anthropic_upstream):
    """The policy's summary call cannot reach its model (the route's Provider is not reachable from compactweb
    itself): Claude Code gets Anthropic's 500 `api_error`, which it retries, with the gateway's fixed message; the
    failure's text (host names, the model's answer) is the operator's: in the session's attempt, not the answer."""
    policy = CompactionPolicy.objects.create(name="claude-unreachable", strategy="local")
    route = claude_route(mode="compactweb", policy=policy)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    response = claude.post([*claude.messages, {"role": "user", "content": [
        {"type": "text", "text": "Your task is to create a detailed summary of the conversation so far."}]}])
    assert response.status_code == 500, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert error["error"]["message"] == anthropic_compaction.INTERNAL_FAILURE
    assert "upstream.invalid" not in response.text
    attempt = GatewayAttempt.objects.filter(status=500).get()
    assert "upstream.invalid" in attempt.error or "could not compact" in attempt.error
    assert not Compaction.objects.filter(session=Session.objects.get(source="gateway")).exists()

