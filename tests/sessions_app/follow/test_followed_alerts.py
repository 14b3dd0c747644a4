"""The alert rules run on followed and shipped sessions as their lines arrive, and history imported after the fact
never counts toward a live storm (issue 44). Through the public paths: the follower reads real files, the import
API takes a transcript, the shipped-files API takes a rollout's batches, and the alerts API answers what was raised."""

from __future__ import annotations

import base64
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.transfer.follow import sync_file
from tests.sessions_app.claude_transcript.transcripts import SESSION, Transcript, text, tool_result, tool_use
from tests.sessions_app.transfer.test_shipped_files import LOCAL, NAME

pytestmark = pytest.mark.django_db


def _prompt(t: Transcript, n: int) -> None:
    t.user(f"prompt {n}: fix the parser")
    t.assistant([tool_use(f"toolu_{n}", f"cat notes-{n}.txt")], message_id=f"msg_{n}a")
    t.user(tool_result(f"toolu_{n}", f"notes {n}"))
    t.assistant([text(f"Fixed {n}.")], message_id=f"msg_{n}b")


def _compaction(t: Transcript, n: int) -> None:
    t.boundary("auto", 9000 + n)
    t.summary(f"Summary {n}: the parser is being fixed.")


def _alerts(api, **query) -> list[dict]:
    response = api.get("/api/v1/alerts", query)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_followed_claude_session_compacting_in_a_burst_raises_a_storm_as_its_lines_arrive(tmp_path, operator_api,
                                                                                           provider, policy):
    path = tmp_path / f"{SESSION}.jsonl"
    t = Transcript()
    _prompt(t, 0)
    path.write_bytes(t.bytes())
    session_id = sync_file(path=path).session_id
    raised = []
    for n in range(1, 5):  # four compactions in a minute: more than the default three in ten minutes
        written = len(t.lines)
        _compaction(t, n)
        _prompt(t, n)
        with path.open("ab") as fh:
            fh.write(b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in t.lines[written:]))
        assert sync_file(path=path).action == "appended"
        raised.append([a["kind"] for a in _alerts(operator_api) if a["session"] == session_id])
    assert raised[:3] == [[], [], []]
    assert "storm" in raised[3]
    (storm,) = [a for a in _alerts(operator_api) if a["kind"] == "storm"]
    assert len(storm["compactions"]) == 4


def test_imported_history_never_counts_toward_a_live_fleet_storm(tmp_path, operator_api, support_api, provider,
                                                                  policy):
    old = Transcript()
    for n in range(40):  # forty old compactions, imported after the fact
        _prompt(old, n)
        _compaction(old, n)
    imported = operator_api.post("/api/v1/sessions/import",
                                 {"file": SimpleUploadedFile(f"{SESSION}.jsonl", old.bytes())})
    assert imported.status_code == 201 and imported.json()["compactions"] == 40
    assert _alerts(operator_api) == []  # history raises nothing

    # A live Codex session shipped from another machine compacts once.
    lines = LOCAL.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"type":"compacted"' in line)
    first, rest = b"".join(lines[:cut]), b"".join(lines[cut:])
    file = f"laptop/2026/12/01/{NAME}"
    for offset, data in ((0, first), (len(first), rest)):
        answer = support_api.post("/api/v1/shipped-files/lines", {  # it holds Codex's developer message
            "file": file, "name": NAME, "offset": offset, "data": base64.b64encode(data).decode()}, format="json")
        assert answer.status_code == 200, answer.content
    live = answer.json()["session"]
    from compaction_app.models import Compaction

    assert Compaction.objects.filter(session_id=live, history=False).count() == 1
    assert [a["kind"] for a in _alerts(operator_api)] == []  # 1 live compaction, not 41: no fleet storm
