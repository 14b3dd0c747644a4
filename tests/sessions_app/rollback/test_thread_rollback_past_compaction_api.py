"""Thread rollback past a compaction (spec §8.2, §8.3, the post-#15577 shape), through the API on the scripted
provider: when the dropped turns held the context a turn re-injected after a compaction, the next request carries
the full initial context exactly once, after the surviving history and before the new user message."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from tests.fakes.scripted_api import CONTEXT, compaction_reply, text_reply

pytestmark = pytest.mark.django_db

COMPACTION = {"type": "compaction", "encrypted_content": "ENC"}


def test_rolling_back_the_turn_that_re_injected_context_after_a_compaction_re_injects_it_once(
        scripted_sessions, support_api):
    script = scripted_sessions.script
    session = scripted_sessions.create(initial_context=CONTEXT)
    sid = session["id"]
    script.add(text_reply("one"), compaction_reply("ENC"), text_reply("two"), text_reply("three"))
    scripted_sessions.turn(sid, "first")
    compacted = scripted_sessions.api.post(f"/api/v1/sessions/{sid}/compact", {"strategy": "remote_v2"},
                                           format="json")
    assert compacted.status_code in (200, 201), compacted.json()
    scripted_sessions.turn(sid, "second")  # DoNotInject: this turn re-injects the full context (spec §5.3)
    assert script.requests[2].json["input"] == [user_message("first"), COMPACTION, *CONTEXT, user_message("second")]

    rolled = support_api.post(f"/api/v1/sessions/{sid}/thread-rollback", {"num_turns": 1}, format="json")
    assert rolled.status_code == 200, rolled.json()
    assert scripted_sessions.history(sid) == [user_message("first"), COMPACTION]
    scripted_sessions.turn(sid, "third")

    assert script.requests[3].json["input"] == [user_message("first"), COMPACTION, *CONTEXT, user_message("third")]


def test_rolling_back_a_later_turn_keeps_the_baseline_and_injects_nothing(scripted_sessions, support_api):
    script = scripted_sessions.script
    session = scripted_sessions.create(initial_context=CONTEXT)
    sid = session["id"]
    script.add(text_reply("one"), text_reply("two"), text_reply("three"))
    scripted_sessions.turn(sid, "first")
    scripted_sessions.turn(sid, "second")

    assert support_api.post(f"/api/v1/sessions/{sid}/thread-rollback", {"num_turns": 1},
                            format="json").status_code == 200
    scripted_sessions.turn(sid, "third")

    sent = script.requests[2].json["input"]
    assert sent[: len(CONTEXT)] == CONTEXT and sum(1 for i in sent if i in CONTEXT) == len(CONTEXT)
    assert sent[len(CONTEXT):] == [user_message("first"),
                                   {"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": "one"}]},
                                   user_message("third")]
