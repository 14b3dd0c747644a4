"""Issue 14: bad input answers 4xx in the API's error shape, never a 500, and stores nothing: JSON nested past
the recursion limit, lone surrogates, and bodies over the size limits (413), the rollout import included."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from compactweb.api_tokens import issue_token
from compactweb.routing import http_router
from sessions_app.models import RolloutLine, Session

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    return response.json()["error"]


def test_json_nested_past_the_recursion_limit_is_a_400(operator_api, session):
    body = '{"items": ' + "[" * 50_000 + "]" * 50_000 + "}"
    response = operator_api.generic("POST", f"/api/v1/sessions/{session.pk}/items", body,
                                    content_type="application/json")
    assert _error(response, 400)["code"] == "parse_error"
    assert "nested" in response.json()["error"]["message"]


def test_json_nested_a_little_past_the_depth_limit_is_a_400_too(operator_api, provider, policy):
    deep = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x",
                                                            "extra": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]}
    for _ in range(40):
        deep = {"wrap": deep}
    response = operator_api.post("/api/v1/sessions", {"title": "t", "provider": provider.pk, "policy": policy.pk,
                                                      "items": [deep]}, format="json")
    assert _error(response, 400)["code"] == "parse_error"
    assert not Session.objects.filter(title="t").exists()


@pytest.mark.parametrize("text", ['"\\ud800"', '"a\\udfffb"', '"\\udc00\\ud800"'])
def test_a_lone_surrogate_is_a_400_and_nothing_is_stored(operator_api, session, text):
    before = RolloutLine.objects.filter(session=session).count()
    body = '{"items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": ' + text + "}]}]}"
    response = operator_api.generic("POST", f"/api/v1/sessions/{session.pk}/items", body,
                                    content_type="application/json")
    assert "surrogate" in _error(response, 400)["message"]
    assert RolloutLine.objects.filter(session=session).count() == before


def test_a_lone_surrogate_in_a_key_is_a_400(operator_api, session):
    body = '{"items": [{"\\ud800": 1}]}'
    response = operator_api.generic("POST", f"/api/v1/sessions/{session.pk}/items", body,
                                    content_type="application/json")
    assert _error(response, 400)["code"] == "parse_error"


def test_a_paired_surrogate_is_an_ordinary_character(operator_api, session):
    body = ('{"items": [{"type": "message", "role": "user", "content": [{"type": "input_text", '
            '"text": "\\ud83d\\ude00"}]}]}')
    response = operator_api.generic("POST", f"/api/v1/sessions/{session.pk}/items", body,
                                    content_type="application/json")
    assert response.status_code == 201, response.content


def test_a_body_over_the_request_limit_is_a_413_in_the_error_shape(operator_api, session, settings):
    settings.COMPACTWEB_MAX_REQUEST_BYTES = 2_000
    before = RolloutLine.objects.filter(session=session).count()
    big = {"items": [{**USER, "content": [{"type": "input_text", "text": "x" * 5_000}]}]}
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/items", big, format="json")
    assert _error(response, 413)["code"] == "request_too_large"
    assert RolloutLine.objects.filter(session=session).count() == before


def test_the_rollout_import_has_its_own_larger_limit(support_api, settings, provider, policy, rollout_file):
    settings.COMPACTWEB_MAX_REQUEST_BYTES = 100
    settings.COMPACTWEB_MAX_IMPORT_BYTES = len(rollout_file) + 10_000
    accepted = support_api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile("r.jsonl", rollout_file)})
    assert accepted.status_code == 201, accepted.content
    settings.COMPACTWEB_MAX_IMPORT_BYTES = len(rollout_file) // 2
    sessions = Session.objects.count()
    refused = support_api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile("r.jsonl", rollout_file)})
    assert _error(refused, 413)["code"] == "request_too_large"
    raw = support_api.generic("POST", "/api/v1/sessions/import", rollout_file, content_type="application/x-ndjson")
    assert _error(raw, 413)["code"] == "request_too_large"
    assert Session.objects.count() == sessions


@pytest.fixture
def rollout_file() -> bytes:
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "fixtures" / "rollouts" / "codex_0169_local_compaction.jsonl"
            ).read_bytes()


@pytest.fixture
def keep_test_connection():
    """Django's ASGI handler closes connections after each request; keep the test's transaction open."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _asgi_post(path: str, content, headers: dict) -> httpx.Response:
    app = http_router(get_asgi_application())

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
            return await c.post(path, content=content, headers=headers)

    return async_to_sync(go)()


def test_a_chunked_body_without_length_is_cut_off_at_the_limit_by_the_asgi_app(db, settings, keep_test_connection,
                                                                                make_user, session):
    settings.COMPACTWEB_MAX_REQUEST_BYTES = 10_000
    token = issue_token(user=make_user("operator"))

    async def chunks():
        for _ in range(100):
            yield b" " * 1_000

    response = _asgi_post(f"/api/v1/sessions/{session.pk}/items", chunks(),
                          {"Authorization": f"Token {token}", "Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"


def test_a_chunked_body_under_the_limit_reaches_the_view_whole(db, keep_test_connection, make_user, session):
    token = issue_token(user=make_user("operator"))
    body = b'{"items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}'

    async def chunks():
        for start in range(0, len(body), 10):
            yield body[start:start + 10]

    response = _asgi_post(f"/api/v1/sessions/{session.pk}/items", chunks(),
                          {"Authorization": f"Token {token}", "Content-Type": "application/json"})
    assert response.status_code == 201, response.text


def test_a_declared_length_over_the_limit_is_refused_before_reading(db, settings):
    settings.COMPACTWEB_MAX_REQUEST_BYTES = 10
    response = _asgi_post("/api/v1/sessions", b"x" * 100, {"Content-Type": "application/json"})
    assert response.status_code == 413
