"""The first turn of a fresh thread (spec §2.4.1, §5.3): Codex's pre-turn check runs on an empty history, so a
session created with only an initial context samples first, and the turn records that context as its context
update (after `turn_started`, before the turn's `turn_context` and the user message)."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_api import CONTEXT, line_kinds, text_reply

pytestmark = pytest.mark.django_db


def test_a_context_only_session_samples_first_even_when_its_context_is_over_the_auto_limit(scripted_sessions):
    script = scripted_sessions.script
    big_context = [*CONTEXT, {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<environment_context>\n" + "  <note>long</note>\n" * 400
         + "</environment_context>"}]}]
    session = scripted_sessions.create(initial_context=big_context, policy_fields={"auto_compact_token_limit": 500})
    assert session["tokens_in_window"] < 500  # nothing of the context is counted before the first turn
    script.add(text_reply("Hello."))

    data = scripted_sessions.turn(session["id"], "hi")

    assert data["status"] == "completed" and data["compactions"] == [], data
    (request,) = script.requests
    assert request.path == "/v1/responses"
    body = request.json
    assert body["input"] == [*big_context, {"type": "message", "role": "user",
                                            "content": [{"type": "input_text", "text": "hi"}]}]
    assert all(item.get("type") != "compaction_trigger" for item in body["input"])
    kinds = line_kinds(scripted_sessions.rollout(session["id"]))
    assert kinds[:8] == ["session_meta", "event:turn_started", "item:message:developer", "item:message:user",
                         "item:message:user", "item:message:user", "turn_context", "item:message:user"]


def test_the_second_turn_of_such_a_session_does_not_inject_the_context_again(scripted_sessions):
    script = scripted_sessions.script
    session = scripted_sessions.create(initial_context=CONTEXT)
    script.add(text_reply("one"), text_reply("two"))

    scripted_sessions.turn(session["id"], "first")
    scripted_sessions.turn(session["id"], "second")

    second = script.requests[1].json["input"]
    assert second[: len(CONTEXT)] == CONTEXT
    assert sum(1 for item in second if item in CONTEXT) == len(CONTEXT)


def test_a_session_created_with_items_keeps_its_context_before_them(scripted_sessions):
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "imported"}]}
    session = scripted_sessions.create(initial_context=CONTEXT, items=[user])

    assert scripted_sessions.history(session["id"]) == [*CONTEXT, user]
