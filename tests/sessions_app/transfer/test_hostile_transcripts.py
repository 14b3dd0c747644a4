"""Hostile Claude Code transcripts are read in linear time and bounded memory, or refused naming the line (issue
44): a reused uuid (it used to close a parent cycle the reader walked forever), parent links to entries not read
yet or never, and a deep tree that rewinds to a deep entry on every line, through every path a file takes: the
import API, the Import page, the shipped-files API and the follower. Each test carries a timeout so a reader that
loops fails instead of hanging the run."""

from __future__ import annotations

import base64
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.claude_transcript import convert
from sessions_app.models import CodexSource, RolloutLine, Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection
from sessions_app.transfer.follow import sync_file

SESSION = "7d4c2a0e-5b1f-4c3e-9a8d-2f6e1b0c9d71"
NAME = f"{SESSION}.jsonl"
pytestmark = pytest.mark.timeout(60)


def entry(uuid: str, parent: str | None, kind: str, text: str, n: int = 0) -> dict:
    message = ({"role": "user", "content": text} if kind == "user" else
               {"id": f"msg_{uuid}", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": text}]})
    return {"parentUuid": parent, "isSidechain": False, "type": kind, "message": message, "uuid": uuid,
            "timestamp": f"2026-12-02T22:00:{n % 60:02d}.000Z", "sessionId": SESSION, "cwd": "/home/dev/p",
            "version": "2.1.332"}


def jsonl(entries: list[dict]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in entries)


# The file: four lines, the third reuses the first uuid with the second as its parent (a cycle A -> B -> A),
# the fourth continues from B, which made the reader rebuild B's history around the cycle forever.
REUSED_UUID = jsonl([
    entry("a", None, "user", "first prompt", 1),
    entry("b", "a", "assistant", "first answer", 2),
    entry("a", "b", "user", "the first uuid again", 3),
    entry("c", "b", "user", "a prompt after b", 4),
])


def _import(api, data: bytes, *, strict: bool = False):
    return api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(NAME, data),
                                                "strict": "true" if strict else "false"})


def _texts(session) -> list[str]:
    return [part["text"] for item in selectors.live_items(session=session) if item["type"] == "message"
            for part in item["content"]]


def test_a_transcript_reusing_a_uuid_imports_at_once_skipping_the_repeated_entry(operator_api, provider, policy):
    response = _import(operator_api, REUSED_UUID)
    assert response.status_code == 201, response.content
    (problem,) = response.json()["problems"]
    assert problem["line"] == 3 and problem["action"] == "skipped" and "already used" in problem["reason"]
    session = Session.objects.get(pk=response.json()["session"])
    # c goes on from b: the history of the branch a -> b, then c (the repeated entry is no part of it).
    assert _texts(session) == ["first prompt", "first answer", "a prompt after b"]
    assert verify_projection(session=session) == []


def test_a_strict_import_of_a_transcript_reusing_a_uuid_is_a_400_naming_the_line(operator_api, provider, policy):
    response = _import(operator_api, REUSED_UUID, strict=True)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_rollout" and [x["line"] for x in error["lines"]] == [3]
    assert "already used" in error["lines"][0]["message"] and not Session.objects.exists()


def test_the_import_page_takes_a_transcript_reusing_a_uuid_and_says_what_it_skipped(client, operator_user, provider,
                                                                                    policy):
    client.force_login(operator_user)
    response = client.post("/import/", {"file": SimpleUploadedFile(NAME, REUSED_UUID), "provider": provider.pk,
                                        "policy": policy.pk}, follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "1 line(s) skipped" in page and "line 3" in page and "already used" in page
    strict = client.post("/import/", {"file": SimpleUploadedFile(NAME, REUSED_UUID), "strict": "1",
                                      "new_thread_id": "1"})
    assert strict.status_code == 400 and "already used" in strict.content.decode()


def test_a_shipped_transcript_reusing_a_uuid_is_read_at_once_and_its_problem_noted(operator_api, provider, policy):
    response = operator_api.post("/api/v1/shipped-files/lines", {
        "file": f"laptop/-home-dev-p/{NAME}", "name": NAME, "offset": 0,
        "data": base64.b64encode(REUSED_UUID).decode()}, format="json")
    assert response.status_code == 200, response.content
    source = CodexSource.objects.get(session_id=response.json()["session"])
    assert [(x["line"], x["action"]) for x in source.problems] == [(3, "skipped")]
    assert _texts(source.session) == ["first prompt", "first answer", "a prompt after b"]


def test_a_followed_transcript_reusing_a_uuid_in_appended_lines_is_read_at_once(tmp_path, provider, policy, client,
                                                                               operator_user):
    path = tmp_path / NAME
    lines = REUSED_UUID.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))
    assert sync_file(path=path).action == "imported"
    with path.open("ab") as fh:
        fh.write(b"".join(lines[2:]))
    result = sync_file(path=path)
    assert result.action == "appended"
    source = CodexSource.objects.get(session_id=result.session_id)
    assert [(x["line"], x["action"]) for x in source.problems] == [(3, "skipped")]
    assert _texts(source.session) == ["first prompt", "first answer", "a prompt after b"]
    client.force_login(operator_user)
    page = client.get(f"/sessions/{result.session_id}/").content.decode()
    assert 'data-problem-line="3"' in page and "line 3 skipped: uuid &#x27;a&#x27; was already used" in page


def test_parents_named_before_they_are_read_or_never_read_attach_to_the_live_leaf(operator_api, provider, policy):
    # a names c (read later) as its parent, b names a, c names b: a cycle if parents were taken as written.
    # d names an entry the file never has.
    data = jsonl([
        entry("a", "c", "user", "one", 1),
        entry("b", "a", "assistant", "two", 2),
        entry("c", "b", "user", "three", 3),
        entry("d", "nowhere", "assistant", "four", 4),
        entry("e", "c", "user", "five: back to c", 5),
    ])
    response = _import(operator_api, data)
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["session"])
    assert _texts(session) == ["one", "two", "three", "five: back to c"]
    assert verify_projection(session=session) == []


def _rebuilt_items(session) -> int:
    return sum(len(payload.get("replacement_history") or [])
               for payload in RolloutLine.objects.filter(session=session, kind="rollback")
               .values_list("payload", flat=True))


def test_a_deep_transcript_rewinding_on_every_line_rebuilds_history_linear_in_its_size(operator_api, provider, policy,
                                                                                     monkeypatch):
    # A chain of 400 entries, then 400 entries each going back to the entry before the chain's end, alternately
    # from two branches: taken as written, every one would copy ~400 items (160,000 in all, quadratic). The limit
    # is lowered so a test-sized file reaches it; what it bounds is the same.
    monkeypatch.setattr(convert, "REBUILD_BYTES_PER_BYTE_READ", 2)
    monkeypatch.setattr(convert, "REBUILD_BYTES_FREE", 0)
    chain = [entry(f"n{i}", f"n{i - 1}" if i else None, "user" if i % 2 == 0 else "assistant", f"step {i}", i)
             for i in range(400)]
    rewinds = [entry(f"r{i}", "n398" if i % 2 == 0 else "n399", "user", f"rewind {i}", i) for i in range(400)]
    data = jsonl(chain + rewinds)
    response = _import(operator_api, data)
    assert response.status_code == 201, response.content
    problems = response.json()["problems"]
    assert problems and all(x["action"] == "skipped" and "rewinds" in x["reason"] for x in problems)
    session = Session.objects.get(pk=response.json()["session"])
    entries = len(chain) + len(rewinds)
    # Each copied item cost its line's bytes: the items copied stay within twice the file, counted in lines.
    assert 0 < _rebuilt_items(session) <= 2 * entries
    assert verify_projection(session=session) == []


def test_a_partial_compaction_listing_one_message_many_times_keeps_it_once(operator_api, provider, policy):
    kept = entry("k", None, "user", "keep me", 1)
    boundary = {"parentUuid": None, "isSidechain": False, "type": "system", "subtype": "compact_boundary",
                "content": "Conversation compacted", "uuid": "bnd", "timestamp": "2026-12-02T22:00:02.000Z",
                "sessionId": SESSION, "logicalParentUuid": "k",
                "compactMetadata": {"trigger": "auto", "preTokens": 9000,
                                    "preservedMessages": {"uuids": ["k"] * 20_000}}}
    summary = {**entry("s", "bnd", "user", "Summary: keep me.", 3), "isCompactSummary": True}
    response = _import(operator_api, jsonl([kept, boundary, summary]))
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["session"])
    assert _texts(session) == ["Summary: keep me.", "keep me"]
