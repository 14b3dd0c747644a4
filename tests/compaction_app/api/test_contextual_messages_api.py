"""One predicate for real and contextual user messages (spec §1.2), checked where an operator meets it: what local
compaction collects, what the §5.2 filter and v2 retention keep, and what a thread rollback counts as a user turn,
through the API on the scripted provider."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from tests.fakes.scripted_api import compaction_reply, text_reply
from tests.fakes.scripted_provider import assistant

pytestmark = pytest.mark.django_db

WARNINGS = [
    "Warning: The maximum number of unified exec processes you can keep open is 60 and you currently have 61 "
    "processes open. Reuse older processes or close them to prevent automatic pruning of old processes",
    "Warning: apply_patch was requested via exec_command. Use the apply_patch tool instead of exec_command.",
    "Warning: Your account was flagged for potentially high-risk cyber activity and this request was routed to "
    "gpt-5.2 as a fallback.",
]
LOWERCASE_AGENTS = "# agents.md instructions for /repo\n\n<INSTRUCTIONS>\nbe terse\n</INSTRUCTIONS>"
BODY = [user_message("fix the parser"), *(user_message(w) for w in WARNINGS), user_message(LOWERCASE_AGENTS),
        user_message("<image>"), assistant("done")]


def compact(scripted_sessions, sid, strategy):
    response = scripted_sessions.api.post(f"/api/v1/sessions/{sid}/compact", {"strategy": strategy}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_local_compaction_collects_only_real_user_messages(scripted_sessions):
    session = scripted_sessions.create(items=BODY, provider_fields={"remote_compaction": "none"})
    scripted_sessions.script.add(text_reply("the parser is fixed"))

    compact(scripted_sessions, session["id"], "local")

    # A lone `<image>` label with no image is ordinary text, so it is a real user message.
    assert scripted_sessions.history(session["id"]) == [
        user_message("fix the parser"), user_message("<image>"),
        user_message(f"{SUMMARY_PREFIX}\nthe parser is fixed"),
    ]


def test_remote_v2_retention_and_the_output_filter_drop_warnings_and_markers(scripted_sessions):
    session = scripted_sessions.create(items=BODY)
    scripted_sessions.script.add(compaction_reply("ENC"))

    compact(scripted_sessions, session["id"], "remote_v2")

    assert scripted_sessions.history(session["id"]) == [
        user_message("fix the parser"), user_message("<image>"), {"type": "compaction", "encrypted_content": "ENC"},
    ]


def test_remote_v1_output_filter_drops_warnings_returned_by_the_server(scripted_sessions):
    from tests.fakes.scripted_provider import Reply

    session = scripted_sessions.create(items=BODY, provider_fields={"remote_compaction": "v1"})
    returned = [user_message("fix the parser"), *(user_message(w) for w in WARNINGS),
                {"type": "compaction", "encrypted_content": "ENC"}]
    scripted_sessions.script.add(Reply.json(200, {"output": returned}))

    compact(scripted_sessions, session["id"], "remote_v1")

    assert scripted_sessions.history(session["id"]) == [user_message("fix the parser"),
                                                        {"type": "compaction", "encrypted_content": "ENC"}]


def test_a_thread_rollback_never_counts_a_warning_as_a_user_turn(scripted_sessions, support_api):
    items = [user_message("first"), assistant("one"), user_message("second"), assistant("two"),
             *(user_message(w) for w in WARNINGS)]
    session = scripted_sessions.create(items=items)

    response = support_api.post(f"/api/v1/sessions/{session['id']}/thread-rollback", {"num_turns": 1},
                                format="json")

    assert response.status_code == 200, response.json()
    assert scripted_sessions.history(session["id"]) == [user_message("first"), assistant("one")]
