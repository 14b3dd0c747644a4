"""Issue 41: `"stream": false` is answered as one JSON response; a body with a lone UTF-16 surrogate (valid JSON, not valid Unicode text) or bytes that are not UTF-8
is refused with 400 in the API's error shape, never a 500, on every gateway path and on the simulated model's
Responses and Messages paths; nothing is forwarded."""

from __future__ import annotations

import json

import pytest

from tests.gateway_app.conftest import call
from tests.gateway_app.test_proxy import bearer
from tests.gateway_app.test_recording import wire

pytestmark = pytest.mark.django_db(transaction=True)

LONE = b'{"model": "compactweb-sim", "stream": true, "input": [{"type": "message", "role": "user", ' \
       b'"content": [{"type": "input_text", "text": "half an emoji \\ud83d here"}]}]}'
LONE_KEY = b'{"model": "compactweb-sim", "input": [{"type": "message", "role": "user", "\\udfff": 1, ' \
           b'"content": [{"type": "input_text", "text": "x"}]}]}'
NOT_UTF8 = b'{"model": "compactweb-sim", "input": "caf\xe9 \xff\xfe"}'
MESSAGES_LONE = b'{"model": "compactweb-sim", "max_tokens": 50, "messages": [{"role": "user", ' \
                b'"content": "half an emoji \\ud83d here"}]}'
MESSAGES_NOT_UTF8 = b'{"model": "compactweb-sim", "max_tokens": 50, "messages": [{"role": "user", ' \
                    b'"content": "caf\xe9"}]}'
PAIRED = b'{"model": "compactweb-sim", "stream": true, "input": [{"type": "message", "role": "user", ' \
         b'"content": [{"type": "input_text", "text": "a whole emoji \\ud83d\\ude00 is fine"}]}]}'


@pytest.mark.parametrize("path", ["/gateway/v1/responses", "/gateway/v1/responses/compact"])
@pytest.mark.parametrize("raw", [LONE, LONE_KEY, NOT_UTF8], ids=["lone-surrogate", "lone-surrogate-key", "not-utf8"])
def test_the_gateway_refuses_text_that_is_not_unicode_with_400(sim_upstream, gateway_key, path, raw):
    response = call("POST", path, content=raw, headers={**bearer(gateway_key), "content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert sim_upstream.requests() == []


def test_a_whole_surrogate_pair_passes_the_gateway(sim_upstream, gateway_key):
    response = call("POST", "/gateway/v1/responses", content=PAIRED,
                    headers={**bearer(gateway_key), "content-type": "application/json"})
    assert response.status_code == 200
    assert "\U0001f600" in str(sim_upstream.requests()[0]["body"]["input"])


@pytest.mark.parametrize(("path", "raw"), [
    ("/sim/v1/responses", LONE), ("/sim/v1/responses", LONE_KEY), ("/sim/v1/responses", NOT_UTF8),
    ("/sim/v1/responses/compact", LONE), ("/sim/anthropic/v1/messages", MESSAGES_LONE),
    ("/sim/anthropic/v1/messages", MESSAGES_NOT_UTF8), ("/sim/anthropic/v1/messages/count_tokens", MESSAGES_LONE)])
def test_the_simulated_model_refuses_text_that_is_not_unicode_with_400(settings, path, raw):
    settings.COMPACTWEB_SIM_TOKEN = "sim-test-token"
    response = call("POST", path, content=raw, headers={"content-type": "application/json",
                                                        "authorization": "Bearer sim-test-token"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_stream_false_is_answered_as_one_json_response_and_recorded(sim_upstream, gateway_key):
    from tests.gateway_app.test_proxy import BASE, meta, user

    body = {"model": "compactweb-sim", "stream": False, "input": [BASE, user("please fix parser bug 3")]}
    response = call("POST", "/gateway/v1/responses", json=body,
                    headers={**bearer(gateway_key), **meta("0190ffff-0000-7000-8000-000000000001")})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert answer["object"] == "response" and answer["status"] == "completed" and answer["output"]
    from gateway_app.models import GatewaySession
    from sessions_app.models import LiveItem

    gs = GatewaySession.objects.get()
    recorded = list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
                    .values_list("item", flat=True))
    output = answer["output"]
    assert [wire(i) for i in recorded[-len(output):]] == [wire(i) for i in output]  # the JSON answer, recorded


def test_stream_false_gets_a_compactweb_compaction_as_one_json_response(sim_upstream, db):
    from compaction_app.models import CompactionPolicy
    from gateway_app.keys import do_create_gateway_key
    from tests.gateway_app.conftest import make_route
    from tests.gateway_app.test_recording import TRIGGER, Codex

    masking = CompactionPolicy.objects.create(name="masking-json", strategy="masking", masking_keep_turns=1)
    # Tool outputs big enough that masking them leaves room to work (tests/gateway_app/test_compaction_room.py).
    codex = Codex(do_create_gateway_key(route=make_route(mode="compactweb", policy=masking), client_name="c").key,
                  output_lines=400)
    for prompt in ("please fix parser bug 3", "now the docs", "and the tests"):
        codex.turn(prompt)
        codex.turn()
    response = call("POST", "/gateway/v1/responses", json={"model": "compactweb-sim", "stream": False, "input": [
        *codex.sent[-1][:1], *codex.history, TRIGGER]}, headers={
        "Authorization": f"Bearer {codex.key}", "x-codex-turn-metadata": json.dumps({"thread_id": codex.thread})})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    (item,) = response.json()["output"]
    assert item["type"] == "compaction" and item["encrypted_content"].startswith("cwgh_")


def test_the_simulated_model_answers_stream_false_as_json(settings):
    settings.COMPACTWEB_SIM_TOKEN = "sim-test-token"
    body = {"model": "compactweb-sim", "stream": False, "input": "hello"}
    response = call("POST", "/sim/v1/responses", json=body, headers={"authorization": "Bearer sim-test-token"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    assert response.json()["status"] == "completed"
