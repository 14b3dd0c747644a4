"""Pins with a budget (issue 32): pinning past the pins' token budget is refused with the figures (API and page),
a pin reaches the model at its next request, and an unpinned text leaves the window at the next compaction, whatever
the strategy kept (masking keeps every message)."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from compaction_app.engine.items import message_text
from compaction_app.engine.pins import PINNED_OPEN, is_pinned_block
from compaction_app.models import CompactionPolicy
from sessions_app.rollout import selectors
from tests.fakes.scripted_api import text_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def history_session(make_session):
    from tests.compaction_app.api.test_retention_api import ITEMS

    return make_session(items=ITEMS)


def pins_url(session_id) -> str:
    return f"/api/v1/sessions/{session_id}/pins"


def test_pinning_past_the_budget_is_refused_with_the_figures(support_api, history_session, policy):
    CompactionPolicy.objects.filter(pk=policy.pk).update(pin_budget_tokens=80)
    url = pins_url(history_session.pk)
    assert support_api.post(url, {"text": "Money is Decimal"}, format="json").status_code == 201
    before = support_api.get(url).json()
    assert before["budget"]["budget"] == 80 and 0 < before["budget"]["used"] <= 80
    refused = support_api.post(url, {"text": "a long pin " * 30}, format="json")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "pin_budget_exceeded"
    assert "over their budget of 80 tokens" in error["message"] and f"{before['budget']['used']} tokens are pinned" \
        in error["message"]
    assert support_api.get(url).json() == before  # nothing was pinned


def test_the_default_budget_is_a_small_share_of_the_usable_window(support_api, history_session):
    budget = support_api.get(pins_url(history_session.pk)).json()["budget"]
    usable = history_session.provider.usable_context_window
    assert budget["budget"] == max(200, usable * 5 // 100) and "5% of the" in budget["source"]
    # Eighty pins do not fit: the session can no longer be pinned out of its own window.
    statuses = [support_api.post(pins_url(history_session.pk), {"text": f"pin number {n} " + "x" * 200},
                                 format="json").status_code for n in range(80)]
    assert statuses[0] == 201 and statuses[-1] == 409
    assert support_api.get(pins_url(history_session.pk)).json()["budget"]["used"] <= budget["budget"]


def test_the_session_page_refuses_a_pin_past_the_budget_with_the_figures(support_user, history_session, policy):
    CompactionPolicy.objects.filter(pk=policy.pk).update(pin_budget_tokens=30)
    client = Client()
    client.force_login(support_user)
    page = client.get(f"/sessions/{history_session.pk}/").content.decode()
    assert 'id="pin-budget"' in page and "0 of 30 tokens" in re.sub(r"<[^>]+>", "", page)  # the total: a live span
    answer = client.post(f"/sessions/{history_session.pk}/pins/", {"kind": "fact", "text": "word " * 60},
                         HTTP_HX_REQUEST="true")
    assert answer.status_code == 409
    body = answer.content.decode()
    assert "Not pinned: the pins would take" in body and "over their budget of 30 tokens" in body


def test_a_pin_reaches_the_model_at_the_next_request(scripted_sessions, support_api):
    session = scripted_sessions.create()
    script = scripted_sessions.script
    script.add(text_reply("first"), text_reply("second"))
    scripted_sessions.turn(session["id"], "start")
    assert support_api.post(pins_url(session["id"]), {"kind": "constraint", "text": "Never touch migrations"},
                            format="json").status_code == 201
    scripted_sessions.turn(session["id"], "go on")
    sent = script.requests[-1].json["input"]
    blocks = [i for i in sent if is_pinned_block(i)]
    assert blocks and "Never touch migrations" in message_text(blocks[-1])


@pytest.mark.parametrize("strategy", ["masking", "token_budget", "local"])
def test_unpinning_removes_the_pin_from_what_every_strategy_keeps(support_api, history_session, strategy):
    url = pins_url(history_session.pk)
    pin = support_api.post(url, {"text": "Never touch migrations"}, format="json").json()
    compacted = support_api.post(f"/api/v1/sessions/{history_session.pk}/compact", {"strategy": "token_budget"},
                                 format="json")
    assert compacted.status_code == 201, compacted.json()
    assert any("Never touch migrations" in message_text(i) for i in live(history_session) if is_pinned_block(i))
    assert support_api.delete(f"{url}/{pin['id']}").status_code == 204
    # At once: the newest pinned block in the window no longer holds the text.
    newest = [i for i in live(history_session) if is_pinned_block(i)][-1]
    assert "Never touch migrations" not in message_text(newest)
    # Grow the history so that every strategy has something to do, then compact: no pinned block survives.
    grown = support_api.post(f"/api/v1/sessions/{history_session.pk}/items", {"items": more_items()}, format="json")
    assert grown.status_code in (200, 201), grown.json()
    answer = support_api.post(f"/api/v1/sessions/{history_session.pk}/compact", {"strategy": strategy},
                              format="json")
    assert answer.status_code == 201, answer.json()
    window = live(history_session)
    assert not any(is_pinned_block(i) for i in window)
    assert not any("Never touch migrations" in json.dumps(i) and PINNED_OPEN in json.dumps(i) for i in window)


def live(session):
    return list(selectors.live_items(session=session))


def more_items():
    return [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]},
        {"type": "function_call", "call_id": "m1", "name": "shell",
         "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]})},
        {"type": "function_call_output", "call_id": "m1", "output": "Exit code: 1\nOutput:\n" + "FAILED t\n" * 80},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and again"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and once more"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "last"}]},
    ]
