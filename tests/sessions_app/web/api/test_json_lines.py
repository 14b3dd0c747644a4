"""JSON Lines answers (the rollout, an export) under both servers: the same bytes, and under ASGI a body Django
streams piece by piece (an async iterator stepped in the sync thread) rather than one it buffers whole."""

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from compactweb.api_tokens import issue_token
from sessions_app.web.api import sessions as api_sessions
from sessions_app.web.api import transfer as api_transfer

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}


def _asgi_get(path: str, *, token: str):
    """GET through Django's ASGI handler. Run from this sync test, the view's database reads come back to this
    thread, so they see the test's transaction."""

    async def get():
        response = await AsyncClient().get(path, headers={"Authorization": f"Token {token}"})
        if not response.streaming:  # an error answered before any stream began
            return response, None
        if not response.is_async:  # a sync body: Django would have buffered it whole (the test fails on is_async)
            return response, list(response.streaming_content)
        return response, [piece async for piece in response.streaming_content]

    return async_to_sync(get)()


@pytest.fixture
def long_session(make_session):
    return make_session(items=[USER] * 7)


@pytest.mark.parametrize(("module", "size_name", "suffix"), [
    (api_sessions, "ROLLOUT_CHUNK", "rollout"),
    (api_transfer, "EXPORT_LINES_PER_CHUNK", "export"),
])
def test_asgi_streams_the_same_bytes_as_wsgi_in_pieces(
    monkeypatch, operator_api, operator_user, long_session, module, size_name, suffix,
):
    monkeypatch.setattr(module, size_name, 3)  # 8 or more lines: several pieces
    path = f"/api/v1/sessions/{long_session.pk}/{suffix}"
    wsgi = operator_api.get(path)
    wsgi_body = b"".join(wsgi.streaming_content)

    asgi, pieces = _asgi_get(path, token=issue_token(user=operator_user))

    assert wsgi.status_code == asgi.status_code == 200
    assert asgi["Content-Type"] == wsgi["Content-Type"] == "application/x-ndjson"
    assert asgi["Content-Disposition"] == wsgi["Content-Disposition"]
    assert asgi.is_async  # an async body: Django sends each piece as it is read instead of buffering the answer
    assert b"".join(pieces) == wsgi_body
    assert len(pieces) >= 3 and all(p.endswith(b"\n") for p in pieces)  # whole lines per piece
    assert len(wsgi_body.splitlines()) >= 8


def test_under_asgi_a_missing_session_is_a_json_error_and_nothing_newer_an_empty_stream(operator_user, make_session):
    session = make_session(items=[USER])
    token = issue_token(user=operator_user)
    missing, pieces = _asgi_get("/api/v1/sessions/999999/export", token=token)
    assert missing.status_code == 404 and pieces is None
    assert missing.json()["error"]["code"] == "not_found"

    rollout, pieces = _asgi_get(f"/api/v1/sessions/{session.pk}/rollout?after={session.last_seq}", token=token)
    assert rollout.status_code == 200 and pieces == []  # nothing newer: an empty stream, not an error
