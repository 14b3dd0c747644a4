"""A process's cached history of a session that another writer moved past (an API user's message, a manual
compaction, another worker running the session's last step) is followed along the lines appended since, read by
seq range, instead of the whole live history: the next turn's request still carries exactly the session's history,
and a turn's cost does not grow with the history when a fleet's steps go to any worker."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from sessions_app.rollout import selectors
from sessions_app.turns import caches
from tests.fakes.scripted_api import compaction_reply, text_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def full_reads(monkeypatch) -> list[int]:
    """The sessions whose whole live history a turn read."""
    seen: list[int] = []
    read = selectors.live_items

    def reading(*, session):
        seen.append(session.pk)
        return read(session=session)

    monkeypatch.setattr(selectors, "live_items", reading)
    return seen


def _append(api, session_id: int, text: str) -> None:
    response = api.post(f"/api/v1/sessions/{session_id}/items", {"items": [user_message(text)]}, format="json")
    assert response.status_code in (200, 201), response.json()


def test_a_turn_after_another_writers_items_sends_them_without_reading_the_whole_history(
        scripted_sessions, full_reads):
    sid = scripted_sessions.create()["id"]
    scripted_sessions.script.add(text_reply("one"), text_reply("two"))
    scripted_sessions.turn(sid, "first")
    _append(scripted_sessions.api, sid, "a note from another client")
    full_reads.clear()

    scripted_sessions.turn(sid, "second")

    assert full_reads == []
    sent = scripted_sessions.script.requests[-1].json["input"]
    assert sent == scripted_sessions.history(sid)[:-1]  # all but this turn's answer
    assert [i["content"][0]["text"] for i in sent if i.get("role") == "user"] == [
        "first", "a note from another client", "second"]


def test_a_compaction_made_outside_the_turn_replaces_the_followed_history(scripted_sessions, full_reads):
    sid = scripted_sessions.create()["id"]
    scripted_sessions.script.add(text_reply("one"), compaction_reply("ENC"), text_reply("two"))
    scripted_sessions.turn(sid, "first")
    compacted = scripted_sessions.api.post(f"/api/v1/sessions/{sid}/compact", {"strategy": "remote_v2"},
                                           format="json")
    assert compacted.status_code in (200, 201), compacted.json()
    full_reads.clear()

    scripted_sessions.turn(sid, "second")

    assert full_reads == []
    sent = scripted_sessions.script.requests[-1].json["input"]
    assert sent == scripted_sessions.history(sid)[:-1]
    assert {"type": "compaction", "encrypted_content": "ENC"} in sent


def test_a_history_further_behind_than_the_catch_up_limit_is_read_in_full(scripted_sessions, full_reads,
                                                                           monkeypatch):
    monkeypatch.setattr(caches, "MAX_CATCH_UP_LINES", 1)
    sid = scripted_sessions.create()["id"]
    scripted_sessions.script.add(text_reply("one"), text_reply("two"))
    scripted_sessions.turn(sid, "first")
    _append(scripted_sessions.api, sid, "one note")
    _append(scripted_sessions.api, sid, "and another")
    full_reads.clear()

    scripted_sessions.turn(sid, "second")

    assert full_reads == [sid]
    assert scripted_sessions.script.requests[-1].json["input"] == scripted_sessions.history(sid)[:-1]
