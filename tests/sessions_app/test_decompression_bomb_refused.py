"""A decompression bomb in a simulator payload never reaches a session (issue 27): appended through the API or
imported in a rollout, a compaction item whose `encrypted_content` inflates past the codec's bound is refused with a
400 naming the field, and nothing is stored."""

from __future__ import annotations

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.models import RolloutLine, Session
from tests.compaction_app.providers.simulated.test_codec import bomb
from tests.sessions_app.transfer.conftest import ROLLOUTS


def test_appending_a_compaction_item_that_is_a_bomb_is_a_400(support_api, session):
    before = RolloutLine.objects.filter(session=session).count()
    response = support_api.post(f"/api/v1/sessions/{session.pk}/items",
                                {"items": [{"type": "compaction", "encrypted_content": bomb()}]}, format="json")

    assert response.status_code == 400, response.content[:500]
    assert "encrypted_content" in response.json()["error"]["message"]
    assert "inflates past" in response.json()["error"]["message"]
    assert RolloutLine.objects.filter(session=session).count() == before


def test_a_reasoning_item_that_is_a_bomb_is_a_400(support_api, session):
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": bomb()}
    response = support_api.post(f"/api/v1/sessions/{session.pk}/items", {"items": [reasoning]}, format="json")
    assert response.status_code == 400 and "inflates past" in response.json()["error"]["message"]


def test_importing_a_rollout_with_a_bomb_is_refused_and_stores_nothing(support_api, provider, policy):
    line = {"timestamp": "2026-04-19T10:40:00.000Z", "type": "response_item",
            "payload": {"type": "compaction", "encrypted_content": bomb()}}
    data = (ROLLOUTS / "basic_session.jsonl").read_bytes().rstrip(b"\n") + b"\n" + json.dumps(line).encode() + b"\n"
    sessions = Session.objects.count()
    response = support_api.post("/api/v1/sessions/import", {
        "file": SimpleUploadedFile("bomb.jsonl", data, content_type="application/x-ndjson"), "strict": "true"})

    assert response.status_code == 400, response.content[:500]
    assert "inflates past" in json.dumps(response.json())
    assert Session.objects.count() == sessions
