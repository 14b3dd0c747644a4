"""Hostile rollout lines are refused or repaired, never a 500 (issue 27): deep nesting, lone surrogates, numbers
past 64 bits or past Python's digit limit, NaN and infinity, NUL characters (PostgreSQL's jsonb cannot hold them),
and a line past the line limit, through the JSON API (strict and tolerant) and the import page. Run on SQLite and,
with DATABASE_URL, on PostgreSQL."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.codex_rollout import RolloutImportError
from sessions_app.codex_rollout.parse import read_lines
from sessions_app.models import RolloutLine, Session
from tests.sessions_app.transfer.conftest import ROLLOUTS

T = '"timestamp":"2026-04-19T10:40:00.000Z"'
USER_TEXT = '{%s,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":%s}]}}'
EVENT = '{%s,"type":"event_msg","payload":{"type":"token_count","info":%s}}'

HOSTILE = {
    "deep nesting": EVENT % (T, "[" * 100_000 + "]" * 100_000),
    "nesting past 64 levels": EVENT % (T, "[" * 70 + "]" * 70),
    "lone surrogate": USER_TEXT % (T, '"a\\ud800b"'),
    "lone surrogate in a key": EVENT % (T, '{"\\udfff": 1}'),
    "integer past 64 bits": EVENT % (T, str(2**64)),
    "integer past Python's digit limit": EVENT % (T, "9" * 5000),
    "float that is infinity": EVENT % (T, "1e999"),
    "NaN": EVENT % (T, "NaN"),
    "Infinity": EVENT % (T, "-Infinity"),
    "NUL in text": USER_TEXT % (T, '"a\\u0000b"'),
    "NUL in a key": EVENT % (T, '{"a\\u0000": 1}'),
}
NUL_CASES = {"NUL in text", "NUL in a key"}


@pytest.fixture
def operator_client(client, support_user):
    # The support role: basic_session.jsonl holds Codex's developer message (sessions_app/web/instructing.py).
    client.force_login(support_user)
    return client


def _file(line: str) -> bytes:
    return (ROLLOUTS / "basic_session.jsonl").read_bytes().rstrip(b"\n") + b"\n" + line.encode() + b"\n"


def _import(api, data: bytes, *, strict: bool):
    return api.post("/api/v1/sessions/import", {
        "file": SimpleUploadedFile("hostile.jsonl", data, content_type="application/x-ndjson"),
        "strict": "true" if strict else "false", "new_thread_id": "true"})


def _no_nul_stored():
    for payload in RolloutLine.objects.values_list("payload", flat=True):
        assert "\\u0000" not in json.dumps(payload)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_strict_import_of_a_hostile_line_is_a_400_naming_it(support_api, provider, policy, case):
    data = _file(HOSTILE[case])
    sessions = Session.objects.count()
    response = _import(support_api, data, strict=True)

    assert response.status_code == 400, response.content[:300]
    body = response.json()["error"]
    assert body["code"] == "invalid_rollout"
    assert [entry["line"] for entry in body["lines"]] == [data.count(b"\n")]
    assert Session.objects.count() == sessions


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_tolerant_import_skips_or_repairs_a_hostile_line(support_api, provider, policy, case):
    data = _file(HOSTILE[case])
    response = _import(support_api, data, strict=False)

    assert response.status_code == 201, response.content[:300]
    (problem,) = response.json()["problems"]
    assert problem["line"] == data.count(b"\n")
    assert problem["action"] == ("repaired" if case in NUL_CASES else "skipped")
    _no_nul_stored()
    session = Session.objects.get(pk=response.json()["session"])
    assert support_api.get(f"/api/v1/sessions/{session.pk}/history").status_code == 200
    assert support_api.get(f"/api/v1/sessions/{session.pk}/rollout").status_code == 200


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_the_import_page_answers_a_hostile_line_without_a_500(operator_client, provider, policy, case):
    data = _file(HOSTILE[case])
    for strict in ("1", ""):
        response = operator_client.post("/import/", {
            "file": SimpleUploadedFile("hostile.jsonl", data), "strict": strict, "new_thread_id": "1"})
        assert response.status_code in ((400,) if strict else (302,)), (strict, response.status_code)
    _no_nul_stored()


def test_a_line_past_the_limit_is_refused_in_both_modes_naming_it(support_api, operator_client, provider, policy,
                                                                    settings):
    settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES = 10_000
    data = _file(USER_TEXT % (T, json.dumps("x" * 20_000)))
    for strict in (True, False):
        response = _import(support_api, data, strict=strict)
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "invalid_rollout" and "longer than 10000 bytes" in error["message"]
        assert error["lines"][0]["line"] == data.count(b"\n")
    raw = support_api.post("/api/v1/sessions/import?strict=false", data, content_type="application/x-ndjson")
    assert raw.status_code == 400 and "longer than 10000 bytes" in raw.json()["error"]["message"]
    page = operator_client.post("/import/", {"file": SimpleUploadedFile("long.jsonl", data)})
    assert page.status_code == 400 and "longer than 10000 bytes" in page.content.decode()


def test_a_long_line_is_refused_while_it_is_read_not_after():
    """A 30 MB line, fed in 64 KiB chunks: refused once the limit is crossed, the rest never read."""
    read = []

    def chunks():
        yield b'{"type":"session_meta"}\n'
        for _ in range(30 * 16):
            read.append(1)
            yield b"x" * 65536

    with pytest.raises(RolloutImportError) as refused:
        read_lines(chunks(), max_line_bytes=1024 * 1024)
    assert refused.value.errors[0][0] == 2
    assert len(read) == 17  # 16 chunks fill the megabyte, the 17th crosses it; 463 are never read


def test_lines_read_in_chunks_are_the_files_lines():
    data = b'{"a":1}\n{"b":2}\r\n\n{"c":3}\r{"d":4}'
    pieces = [data[i:i + 3] for i in range(0, len(data), 3)]
    assert read_lines(pieces, max_line_bytes=100) == data.splitlines(keepends=True)
