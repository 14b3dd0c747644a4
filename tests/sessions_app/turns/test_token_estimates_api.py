"""A screenshot inside a tool output must not trigger a false compaction (spec §3.1): through the API, a session
whose history holds a 400 kB inline image in a `function_call_output` counts it at the fixed image estimate and
its next turn samples without compacting."""

from __future__ import annotations

import base64
import struct

import pytest

from tests.fakes.scripted_api import text_reply

pytestmark = pytest.mark.django_db


def screenshot_url() -> str:
    ihdr = struct.pack(">IIBBBBB", 1280, 800, 8, 6, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0" + bytes(range(256)) * 1200
    return "data:image/png;base64," + base64.b64encode(raw).decode()


@pytest.mark.parametrize("counter", ["provider_encoding", "codex_estimate"])
def test_a_screenshot_in_a_tool_output_is_charged_the_image_estimate_and_causes_no_compaction(
        scripted_sessions, counter):
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "take a screenshot"}]},
        {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_image", "image_url": screenshot_url()}]},
    ]
    session = scripted_sessions.create(items=items, provider_fields={"context_window": 32_000},
                                       policy_fields={"token_counter": counter})
    assert session["tokens_in_window"] < 2_500
    scripted_sessions.script.add(text_reply("I see the login page."))

    data = scripted_sessions.turn(session["id"], "what is on it?")

    assert data["status"] == "completed" and data["compactions"] == []
    assert len(scripted_sessions.script.requests) == 1
