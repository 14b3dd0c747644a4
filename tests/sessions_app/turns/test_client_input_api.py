"""What a client must be able to express through the API (issue 19): Codex-shaped turn input (content items with
text and images), base instructions byte for byte, the session's tools on every request (a v2 compaction's too),
and `reasoning.encrypted_content` when the provider supports reasoning."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from tests.fakes.scripted_api import compaction_reply, text_reply

pytestmark = pytest.mark.django_db

IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}


def test_a_turn_takes_a_list_of_content_items_with_text_and_images(scripted_sessions):
    session = scripted_sessions.create()
    scripted_sessions.script.add(text_reply("A login form."))
    content = [{"type": "input_text", "text": "what is on this screenshot?"}, IMAGE]

    data = scripted_sessions.turn(session["id"], {"input": content})

    message = {"type": "message", "role": "user", "content": content}
    assert data["status"] == "completed" and data["items"][0] == message
    assert scripted_sessions.script.requests[0].json["input"][-1] == message


@pytest.mark.parametrize("payload", [
    {"input": []}, {"input": [{"type": "output_text", "text": "x"}]}, {"input": [{"type": "input_text"}]},
    {"input": [{"type": "input_text", "text": "  "}]}, {"input": [{"type": "input_image"}]}, {"input": {"a": 1}},
])
def test_bad_content_items_are_400_and_record_nothing(scripted_sessions, payload):
    session = scripted_sessions.create()
    before = scripted_sessions.rollout(session["id"])

    response = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/turns", payload, format="json")

    assert response.status_code == 400 and response.json()["error"]["code"]
    assert scripted_sessions.rollout(session["id"]) == before and scripted_sessions.script.requests == []


def test_base_instructions_are_stored_and_sent_byte_exact(scripted_sessions):
    instructions = "  You are a careful coding agent.\n\nBe brief.\n"
    session = scripted_sessions.create(base_instructions=instructions)
    scripted_sessions.script.add(text_reply())

    scripted_sessions.turn(session["id"], "hi")

    assert scripted_sessions.script.requests[0].json["instructions"] == instructions
    meta = scripted_sessions.rollout(session["id"])[0]
    assert meta["payload"]["base_instructions"] == {"text": instructions}


SHELL = {"type": "function", "name": "exec_command", "description": "Run a command.",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}


def test_the_session_tools_go_on_every_turn_request_and_on_a_v2_compaction_request(scripted_sessions):
    script = scripted_sessions.script
    session = scripted_sessions.create(tools=[SHELL], parallel_tool_calls=True,
                                       provider_fields={"supports_reasoning": True})
    script.add(text_reply("one"), compaction_reply("ENC"))

    scripted_sessions.turn(session["id"], "first")
    response = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"method": "remote_v2"},
                                          format="json")

    assert response.status_code == 201, response.json()
    turn, compaction = (r.json for r in script.requests)
    for body in (turn, compaction):
        assert body["tools"] == [SHELL] and body["parallel_tool_calls"] is True
        assert body["include"] == ["reasoning.encrypted_content"] and body["reasoning"]
    assert compaction["input"][-1] == {"type": "compaction_trigger"}
    assert compaction["input"][0] == user_message("first")


@pytest.mark.parametrize("tools", ["shell", [{"name": "x"}], [{"type": "function"}], [1]])
def test_a_bad_tool_list_is_400(scripted_sessions, tools):
    provider, policy = scripted_sessions.provider(), scripted_sessions.policy()
    response = scripted_sessions.api.post("/api/v1/sessions", {"title": "t", "provider": provider.pk,
                                                               "policy": policy.pk, "tools": tools}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"]
