"""The API key is sent as a bearer token and appears in no log line, exception message, repr or response."""

from __future__ import annotations

import logging

import pytest

from compaction_app.engine.port import CompactRequest, ResponsesRequest
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.factory import build_client
from tests.fakes import scripted_provider as sp

KEY = "sk-live-DO-NOT-LEAK-4242"
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}


@pytest.mark.asyncio
async def test_key_is_sent_but_never_logged_raised_or_shown(monkeypatch, caplog, scripted_http, sleeps):
    provider, base_url = scripted_http
    monkeypatch.setenv("CW_SECRET_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    provider.add(
        sp.Reply.sse([sp.created(), sp.output_item_done(sp.assistant("ok")), sp.completed(input_tokens=1)]),
        # A server that echoes the Authorization header back in its error message.
        sp.Reply.error(401, {"error": {"code": "invalid_api_key", "message": f"Incorrect API key: Bearer {KEY}"}}),
        sp.Reply.error(500, {"error": {"message": f"boom {KEY}"}}),
        sp.Reply.error(500, {"error": {"message": f"boom {KEY}"}}),
    )
    config = ProviderConfig(name="real", model="m", base_url=base_url, api_key_env="CW_SECRET_KEY",
                            request_max_retries=1)
    client = build_client(config, sleep=sleeps)
    texts = [repr(client), repr(config), str(config)]
    async with client:
        events = [e async for e in client.stream_response(ResponsesRequest(model="m", input=[USER]))]
        assert events[-1].type == "response.completed"
        with pytest.raises(ProviderError) as unauthorized:
            [e async for e in client.stream_response(ResponsesRequest(model="m", input=[USER]))]
        with pytest.raises(ProviderError) as server_error:
            await client.compact(CompactRequest(model="m", input=[USER]))
    assert unauthorized.value.kind is ErrorKind.UNAUTHORIZED
    assert server_error.value.kind is ErrorKind.SERVER_ERROR
    for error in (unauthorized.value, server_error.value):
        texts += [str(error), repr(error), error.message, *map(str, error.args)]
    texts += [record.getMessage() for record in caplog.records]
    texts += [str(record.args) for record in caplog.records]
    assert any("POST" in t for t in texts)  # logging really happened at DEBUG
    assert not [t for t in texts if KEY in t]
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in provider.requests)


@pytest.mark.asyncio
async def test_no_authorization_header_without_a_configured_or_present_key(monkeypatch, scripted_http):
    provider, base_url = scripted_http
    monkeypatch.delenv("CW_ABSENT_KEY", raising=False)
    turn = [sp.created(), sp.output_item_done(sp.assistant("ok")), sp.completed(input_tokens=1)]
    provider.add(sp.Reply.sse(turn), sp.Reply.sse(turn))
    for env in ("", "CW_ABSENT_KEY"):
        async with build_client(ProviderConfig(name="p", model="m", base_url=base_url, api_key_env=env)) as c:
            [e async for e in c.stream_response(ResponsesRequest(model="m", input=[USER]))]
    assert all("authorization" not in r.headers for r in provider.requests)
