"""Issue 29: operators act on real Codex sessions from the gateway session's page: pause and resume (a clear error
for Codex, nothing forwarded), compact at the next request, pins kept in what the upstream sees, and support's
rollback of a gateway compaction; each with its audit entry, and nothing without the role."""

from __future__ import annotations

import json

import pytest

from compaction_app.models import AuditEntry, Compaction, CompactionPolicy
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewaySession
from sessions_app.models import Session
from tests.gateway_app.conftest import call, make_route
from tests.gateway_app.test_recording import BASE, Codex, live, wire

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
    before = len(sim_upstream.requests())
    refused = codex.post([*codex.history, {"type": "message", "role": "user",
                                           "content": [{"type": "input_text", "text": "go on"}]}])
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "session_paused" and "paused this session" in error["message"]
    assert len(sim_upstream.requests()) == before
    client.post(f"/gateway-sessions/{session.pk}/resume/")
    codex.turn("go on")
    assert len(sim_upstream.requests()) == before + 1


class NoSessionId(Codex):
    """A client that sends no session id (no turn metadata, no prompt cache key): recorded by its history alone."""

    def post(self, items: list[dict], *, kind: str = "turn", path: str = "/gateway/v1/responses"):
        body = {"model": "compactweb-sim", "stream": True, "input": [BASE, *items]}
        self.sent.append(body["input"])
        return call("POST", path, json=body, headers={"Authorization": f"Bearer {self.key}"})


def test_a_session_recorded_by_its_history_alone_offers_no_pause_or_compaction_it_could_not_apply(
        sim_upstream, route, client, operator_user):
    anonymous = NoSessionId(do_create_gateway_key(route=route, client_name="script").key)
    anonymous.turn("please fix parser bug 3")
    session = Session.objects.get(source="gateway")
    assert GatewaySession.objects.get().group_key.startswith("prefix:")
    client.force_login(operator_user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="gateway-pause"' not in page and 'id="gateway-compact-next"' not in page
    assert 'id="gateway-not-steerable"' in page and "sends no session id" in page
    # A page from before says "Not done" and why, and nothing is recorded as done.
    for action in ("pause", "compact"):
        answer = client.post(f"/gateway-sessions/{session.pk}/{action}/", follow=True).content.decode()
        assert "Not done: its client sends no session id" in answer and "Paused:" not in answer
    gs = GatewaySession.objects.get()
    assert not gs.paused and gs.compact_requested_by is None
    assert not AuditEntry.objects.filter(session=session, action__startswith="gateway_").exists()
    anonymous.turn("go on")  # its requests go through, as the card says


def test_pausing_needs_the_operator_role(sim_upstream, route, client, make_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("hello")
    session = Session.objects.get(source="gateway")
    client.force_login(make_user(role=None))
    response = client.post(f"/gateway-sessions/{session.pk}/pause/")
    assert response.status_code in (302, 403)
    assert not GatewaySession.objects.get().paused


def test_pause_and_resume_write_audit_entries_naming_who(sim_upstream, route, client, operator_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("hello")
    session = Session.objects.get(source="gateway")
    client.force_login(operator_user)
    client.post(f"/gateway-sessions/{session.pk}/pause/")
    client.post(f"/gateway-sessions/{session.pk}/resume/")
    entries = list(AuditEntry.objects.filter(session=session).order_by("pk").values_list("action", "actor"))
    assert entries == [("gateway_pause", operator_user.pk), ("gateway_resume", operator_user.pk)]


def _masking_codex(client, user):
    masking = CompactionPolicy.objects.create(name="masking-op", strategy="masking", masking_keep_turns=1)
    codex = Codex(do_create_gateway_key(route=make_route(policy=masking), client_name="bob").key)
    codex.turn("please fix parser bug 3")
    codex.turn()
    codex.turn("now write the docs")
    codex.turn()
    client.force_login(user)
    return codex, Session.objects.get(source="gateway")


def _masked(items):
    return [i for i in items if i.get("type") == "function_call_output" and i["output"].startswith("[output masked")]


def test_compact_at_the_next_request_compacts_before_forwarding_and_tells_the_operator(sim_upstream, client,
                                                                                        operator_user):
    codex, session = _masking_codex(client, operator_user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="gateway-compact-next"' in page
    assert client.post(f"/gateway-sessions/{session.pk}/compact/").status_code == 302
    assert 'id="gateway-compact-pending"' in client.get(f"/sessions/{session.pk}/").content.decode()
    codex.turn("and the changelog")
    sent, received = codex.sent[-1], sim_upstream.requests()[-1]["body"]["input"]
    assert not _masked(sent) and _masked(received)  # Codex sent it whole; the upstream got the compacted history
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.strategy == "masking" and compaction.trigger == "manual"
    assert live(session)[:len(received) - 1] == [wire(i) for i in received[1:]]
    entry = AuditEntry.objects.get(session=session, action="gateway_compaction")
    assert entry.actor == operator_user and entry.compaction == compaction and "compacted" in entry.reason
    # A Codex session's notice names Codex (a Claude Code session's names Claude Code: test_anthropic_steering.py)
    assert entry.reason.startswith("The gateway compacted Codex's history before forwarding its next request (")
    assert not GatewaySession.objects.get().compact_requested_by
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "The gateway compacted Codex" in page and 'id="gateway-compact-pending"' not in page
    # Codex still sends its own (uncompacted) history: the gateway keeps forwarding the compacted one.
    codex.turn("one more thing")
    received = sim_upstream.requests()[-1]["body"]["input"]
    assert _masked(received) and not _masked(codex.sent[-1])
    assert Compaction.objects.filter(session=session).count() == 1  # no second compaction, no rewrite
    assert GatewaySession.objects.get().requests == len(codex.sent)
    assert live(session)[:len(received) - 1] == [wire(i) for i in received[1:]]


def test_asking_for_a_compaction_needs_the_operator_role(sim_upstream, route, client, make_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("hello")
    session = Session.objects.get(source="gateway")
    client.force_login(make_user(role=None))
    assert client.post(f"/gateway-sessions/{session.pk}/compact/").status_code in (302, 403)
    assert GatewaySession.objects.get().compact_requested_by is None
    assert not AuditEntry.objects.filter(action="gateway_compact_request").exists()
    client.force_login(make_user("operator", username="op2"))
    assert client.post(f"/gateway-sessions/{session.pk}/nonsense/").status_code == 404


def test_a_pin_is_kept_in_what_the_upstream_sees_and_an_unpin_too(sim_upstream, route, client, support_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("please fix parser bug 3")
    session = Session.objects.get(source="gateway")
    client.force_login(support_user)
    response = client.post(f"/sessions/{session.pk}/pins/", {"kind": "constraint", "text": "never touch prod.yaml"})
    assert response.status_code in (200, 302)
    assert 'id="gateway-pins"' in client.get(f"/sessions/{session.pk}/").content.decode()
    for text in ("go on", "and the docs"):
        codex.turn(text)
        received = sim_upstream.requests()[-1]["body"]["input"]
        assert "never touch prod.yaml" in json.dumps(received)  # the upstream sees the pin ...
        assert "never touch prod.yaml" not in json.dumps(codex.sent[-1])  # ... Codex itself never had it
        assert live(session)[:len(received) - 1] == [wire(i) for i in received[1:]]
    pin_id = session.rollout_lines.filter(payload__type="pin_added").values_list("payload", flat=True)[0]["pin"]["id"]
    client.post(f"/sessions/{session.pk}/pins/{pin_id}/remove/")
    codex.turn("and the changelog")
    received = json.dumps(sim_upstream.requests()[-1]["body"]["input"])
    assert "No pinned context is in force any more" in received  # the unpin reaches the upstream too
    assert live(session)[:len(sim_upstream.requests()[-1]["body"]["input"]) - 1] == [
        wire(i) for i in sim_upstream.requests()[-1]["body"]["input"][1:]]
    # Pinning and unpinning changed what the upstream sees without rewriting the recorded history.
    assert not session.rollout_lines.filter(kind="compacted").exists()
    assert not Compaction.objects.filter(session=session).exists()


def test_support_rolls_back_a_gateway_compaction_and_the_upstream_gets_the_history_before_it(
        sim_upstream, client, operator_user, support_user):
    codex, session = _masking_codex(client, operator_user)
    client.post(f"/gateway-sessions/{session.pk}/compact/")
    codex.turn("and the changelog")
    assert _masked(sim_upstream.requests()[-1]["body"]["input"])
    compaction = Compaction.objects.get(session=session)
    assert client.post(f"/compactions/{compaction.pk}/rollback/").status_code in (302, 403)  # operator: refused
    assert not Compaction.objects.get(pk=compaction.pk).rolled_back
    client.force_login(support_user)
    client.post(f"/compactions/{compaction.pk}/rollback/", {"reason": "the masking lost the stack trace"})
    assert Compaction.objects.get(pk=compaction.pk).rolled_back
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="gateway-rollback-note"' in page and "still shows its own" in page
    codex.turn("try again")
    received = sim_upstream.requests()[-1]["body"]["input"]
    assert not _masked(received)  # the history before the compaction, and what Codex added since
    assert [wire(i) for i in received] == [wire(i) for i in codex.sent[-1]]
    assert live(session)[:len(received) - 1] == [wire(i) for i in received[1:]]
    assert AuditEntry.objects.filter(session=session, action="gateway_rollback").exists()


def test_the_operator_sees_the_gateways_compaction_notice_live(sim_upstream, client, operator_user):
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from sessions_app.live.render import session_transient
    from sessions_app.rollout.events import GATEWAY_NOTICE, session_group
    from tests.channel_events import drain

    codex, session = _masking_codex(client, operator_user)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(session_group(session.pk), channel)
    client.post(f"/gateway-sessions/{session.pk}/compact/")
    codex.turn("and the changelog")
    (event,) = [e for e in drain(layer, channel) if e.get("kind") == GATEWAY_NOTICE]
    assert "The gateway compacted Codex" in event["detail"]["message"]
    html = session_transient(session_id=session.pk, event=event)  # what the page's live connection swaps in
    assert 'id="gateway-notice"' in html and 'hx-swap-oob="true"' in html and "The gateway compacted" in html
