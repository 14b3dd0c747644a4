"""A provider whose model takes no image input (`supports_images` off, issue 30): every request to it, a turn's
and a compaction's, carries the placeholder text where the history has an image, as Codex's normaliser sends a
text-only model; the stored history keeps the image. Through the JSON API against a scripted provider."""

from __future__ import annotations

import pytest

from compaction_app.engine.history import IMAGE_OMITTED_TEXT
from tests.fakes.scripted_api import text_reply

pytestmark = pytest.mark.django_db

IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is on screen?"}, IMAGE]}
CALL = {"type": "function_call", "name": "view_image", "call_id": "c1", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": [IMAGE]}
ANSWER = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a terminal"}]}


def _images(items) -> int:
    return sum(1 for item in items for part in (item.get("content") or item.get("output") or [])
               if isinstance(part, dict) and part.get("type") == "input_image")


def _placeholders(items) -> int:
    return sum(1 for item in items for part in (item.get("content") or item.get("output") or [])
               if isinstance(part, dict) and part.get("text") == IMAGE_OMITTED_TEXT)


@pytest.mark.parametrize("supports_images", [True, False])
def test_turn_and_compaction_requests_follow_the_providers_image_setting(scripted_sessions, supports_images):
    provider = scripted_sessions.provider(supports_images=supports_images)
    assert scripted_sessions.api.get(f"/api/v1/providers/{provider.pk}").json()["supports_images"] is supports_images
    session = scripted_sessions.create(provider=provider, items=[USER, CALL, OUTPUT, ANSWER])
    scripted_sessions.script.add(text_reply("it shows a terminal"))
    scripted_sessions.turn(session["id"], "and now?")
    scripted_sessions.script.add(text_reply("the summary"))
    compacted = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "local"},
                                           format="json")
    assert compacted.status_code in (200, 201), compacted.json()

    turn_input, compaction_input = (r.json["input"] for r in scripted_sessions.script.requests[:2])
    for sent in (turn_input, compaction_input):
        if supports_images:
            assert (_images(sent), _placeholders(sent)) == (2, 0)
        else:
            # The user's image and the tool output's image both become the placeholder.
            assert (_images(sent), _placeholders(sent)) == (0, 2)
    # What is stored is what the client sent: images and all.
    rollout_items = [line["payload"] for line in scripted_sessions.rollout(session["id"])
                     if line["type"] == "response_item"]
    assert _images(rollout_items) == 2


def test_the_image_setting_is_written_through_the_provider_api(admin_api):
    created = admin_api.post("/api/v1/providers", {"name": "text-only", "base_url": "embedded", "model": "m",
                                                   "supports_images": False}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["supports_images"] is False
    changed = admin_api.patch(f"/api/v1/providers/{created.json()['id']}", {"supports_images": True}, format="json")
    assert changed.status_code == 200 and changed.json()["supports_images"] is True
    assert admin_api.post("/api/v1/providers", {"name": "bad", "base_url": "embedded", "model": "m",
                                                "supports_images": "maybe"}, format="json").status_code == 400
