"""Nothing on the gateway card looks done that is not (issue 47, item 2): its request count moves live (the same
partial on first render and live update), "A compaction is asked for…" clears live once the gateway ran it, and a
compaction that freed nothing is announced as such."""

from __future__ import annotations

import re
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.management import call_command
from django.utils import timezone

from compaction_app.models import AuditEntry, Compaction
from gateway_app import journal
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayInFlight, GatewaySession
from gateway_app.operator import do_record_gateway_compaction, do_request_compaction
from sessions_app.live.render import session_transient
from sessions_app.models import Session
from sessions_app.rollout.events import FLEET_GROUP, GATEWAY_NOTICE, GATEWAY_REQUESTS, session_group
from tests.channel_events import drain
from tests.gateway_app.test_journal import dead_pid
from tests.gateway_app.test_operator import _masking_codex
from tests.gateway_app.test_recording import Codex

pytestmark = pytest.mark.django_db(transaction=True)

CUT = re.compile(r'<p class="muted" id="gateway-cut"( hx-swap-oob="true")?( hidden)?>([^<]*)</p>')
COUNT = re.compile(r'<span id="gateway-requests"( hx-swap-oob="true")?>([\d,]+) requests?</span>')


def _listen(group: str):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group, channel)
    return lambda: drain(layer, channel)


def test_the_cards_request_count_moves_with_each_request_through_the_same_partial(sim_upstream, route, client,
                                                                                   operator_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("please fix parser bug 3")
    session = Session.objects.get(source="gateway")
    client.force_login(operator_user)
    (first,) = COUNT.findall(client.get(f"/sessions/{session.pk}/").content.decode())
    assert first == ("", str(GatewaySession.objects.get().requests))
    events, board = _listen(session_group(session.pk)), _listen(FLEET_GROUP)
    codex.turn("go on")
    codex.turn("and the docs")
    counted = [e for e in events() if e.get("kind") == GATEWAY_REQUESTS]
    assert [e["detail"]["requests"] for e in counted] == [int(first[1]) + 1, int(first[1]) + 2]
    assert counted[-1]["detail"]["requests"] == GatewaySession.objects.get().requests
    assert not [e for e in board() if e.get("kind") == GATEWAY_REQUESTS]  # no fleet row shows it
    html = session_transient(session_id=session.pk, event=counted[-1])  # what the page's live connection swaps in
    assert COUNT.findall(html) == [(' hx-swap-oob="true"', str(counted[-1]["detail"]["requests"]))]
    assert COUNT.findall(client.get(f"/sessions/{session.pk}/").content.decode()) == [
        ("", str(counted[-1]["detail"]["requests"]))]


def test_the_pending_compaction_line_clears_live_once_the_gateway_ran_it(sim_upstream, client, operator_user):
    codex, session = _masking_codex(client, operator_user)
    client.post(f"/gateway-sessions/{session.pk}/compact/")
    assert 'id="gateway-compact-pending"' in client.get(f"/sessions/{session.pk}/").content.decode()
    events = _listen(session_group(session.pk))
    codex.turn("and the changelog")
    (event,) = [e for e in events() if e.get("kind") == GATEWAY_NOTICE]
    assert event["detail"]["state"]["compact_requested"] is False
    html = session_transient(session_id=session.pk, event=event)
    assert '<ul class="gateway-state" id="gateway-state" hx-swap-oob="true">' in html
    assert 'id="gateway-compact-pending"' not in html, html
    assert "Running: Codex's requests go through." in html, html
    assert 'id="gateway-notice"' in html and "The gateway compacted Codex" in html


def test_a_gateway_compaction_that_freed_nothing_says_so_on_the_card(sim_upstream, client, operator_user):
    codex, session = _masking_codex(client, operator_user)
    do_request_compaction(session_id=session.pk, actor=operator_user)
    codex.turn("and the changelog")
    compaction = Compaction.objects.get(session=session)
    Compaction.objects.filter(pk=compaction.pk).update(tokens_after=compaction.tokens_before)
    compaction.refresh_from_db()
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}] * 1425
    do_request_compaction(session_id=session.pk, actor=operator_user)
    notice = do_record_gateway_compaction(session_id=session.pk, compaction=compaction, prefix=items,
                                          replacement=items)
    assert notice.startswith("The gateway ran the compaction before forwarding Codex's next request, but it freed "
                             f"nothing (compaction #{compaction.pk}, observation masking (no model call): 1,425 "
                             f"items, {compaction.tokens_before:,} tokens → 1,425 items")
    assert "compacted Codex" not in notice
    assert AuditEntry.objects.filter(session=session, action="gateway_compaction").latest("pk").reason == notice
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "but it freed nothing" in page and 'id="gateway-compact-pending"' not in page


def test_the_cards_cut_line_appears_live_when_an_exchange_is_cut_through_the_same_partial(sim_upstream, route,
                                                                                            client, operator_user):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("please fix parser bug 3")
    gs = GatewaySession.objects.get()
    client.force_login(operator_user)
    assert CUT.findall(client.get(f"/sessions/{gs.session_id}/").content.decode()) == [("", " hidden", "")]
    events = _listen(session_group(gs.session_id))
    # An exchange begun by a gateway process that is gone: the sweep records it as cut.
    GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{dead_pid()}:1", route_id=gs.route_id,
                                   key_id=gs.key_id, group_key=gs.group_key, endpoint="responses",
                                   request_kind="turn", begun=timezone.now())
    call_command("gateway_sweep_cut")
    (event,) = [e for e in events() if e.get("kind") == GATEWAY_REQUESTS]
    assert event["detail"]["requests"] == GatewaySession.objects.get().requests
    html = session_transient(session_id=gs.session_id, event=event)  # what the page's live connection swaps in
    ((oob, hidden, live_line),) = CUT.findall(html)
    assert oob == ' hx-swap-oob="true"' and not hidden
    assert live_line.startswith("1 exchange cut: the gateway process ended") and "its process is gone" in live_line
    assert COUNT.findall(html) == [(' hx-swap-oob="true"', str(event["detail"]["requests"]))]
    assert CUT.findall(client.get(f"/sessions/{gs.session_id}/").content.decode()) == [("", "", live_line)]
