"""The scripted fake provider replays exact replies and records exact requests, in-process and over HTTP."""

from __future__ import annotations

import httpx
import pytest

from compaction_app.engine.port import CompactRequest, ResponsesRequest
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.client import ResponsesClient
from compaction_app.providers.config import ProviderConfig
from tests.fakes import scripted_provider as sp

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hé"}]}


@pytest.mark.asyncio
async def test_request_bodies_are_recorded_byte_for_byte(scripted_http):
    provider, base_url = scripted_http
    provider.add(sp.Reply.json(200, {"output": []}))
    request = CompactRequest(model="m", input=[USER], instructions="sys")
    async with ResponsesClient(ProviderConfig(name="p", model="m", base_url=base_url)) as client:
        await client.compact(request)
    (recorded,) = provider.requests
    assert (recorded.method, recorded.path) == ("POST", "/v1/responses/compact")
    assert recorded.json == request.to_body()
    assert recorded.body == httpx.Request("POST", base_url, json=request.to_body()).content


@pytest.mark.asyncio
async def test_exhausted_script_answers_500_and_counts_it(scripted_provider):
    config = ProviderConfig(name="p", model="m", base_url="http://fake.test/v1", request_max_retries=0)
    async with ResponsesClient(config, transport=httpx.ASGITransport(app=scripted_provider)) as client:
        with pytest.raises(ProviderError) as caught:
            await client.compact(CompactRequest(model="m", input=[USER]))
    assert caught.value.code == "script_exhausted" and scripted_provider.unexpected == 1


@pytest.mark.asyncio
async def test_aborted_connection_mid_stream_is_a_retryable_transport_error(scripted_http):
    provider, base_url = scripted_http
    provider.add(sp.Reply.sse([sp.created(), sp.output_text_delta("par")], abort=True))
    async with ResponsesClient(ProviderConfig(name="p", model="m", base_url=base_url)) as client:
        with pytest.raises(ProviderError) as caught:
            [e async for e in client.stream_response(ResponsesRequest(model="m", input=[USER]))]
    assert caught.value.kind is ErrorKind.TRANSPORT and caught.value.retryable


@pytest.mark.asyncio
async def test_slow_server_past_the_read_timeout_is_a_timeout(scripted_http, sleeps):
    provider, base_url = scripted_http
    provider.add(sp.Reply.json(200, {"output": []}, delay=0.3))
    config = ProviderConfig(name="p", model="m", base_url=base_url, read_timeout=0.05, request_max_retries=0)
    async with ResponsesClient(config, sleep=sleeps) as client:
        with pytest.raises(ProviderError) as caught:
            await client.compact(CompactRequest(model="m", input=[USER]))
    assert caught.value.kind is ErrorKind.TIMEOUT and caught.value.retryable


@pytest.mark.asyncio
async def test_connection_refused_is_a_transport_error_and_compact_retries_it(sleeps):
    config = ProviderConfig(name="p", model="m", base_url="http://127.0.0.1:9/v1", request_max_retries=2)
    async with ResponsesClient(config, sleep=sleeps) as client:
        with pytest.raises(ProviderError) as caught:
            await client.compact(CompactRequest(model="m", input=[USER]))
    assert caught.value.kind is ErrorKind.TRANSPORT and len(sleeps) == 2


@pytest.mark.asyncio
async def test_failed_event_mid_stream_raises_the_classified_error(scripted_provider):
    scripted_provider.add(sp.Reply.sse([sp.created(), sp.failed("context_length_exceeded", "too long")]))
    config = ProviderConfig(name="p", model="m", base_url="http://fake.test/v1")
    async with ResponsesClient(config, transport=httpx.ASGITransport(app=scripted_provider)) as client:
        with pytest.raises(ProviderError) as caught:
            [e async for e in client.stream_response(ResponsesRequest(model="m", input=[USER]))]
    assert caught.value.kind is ErrorKind.CONTEXT_WINDOW_EXCEEDED and caught.value.message == "too long"


@pytest.mark.asyncio
async def test_compact_body_problems_name_the_field(scripted_provider):
    scripted_provider.add(sp.Reply.json(200, {"id": "x"}), sp.Reply.json(200, ["a"]),
                          sp.Reply.json(200, {"output": [1]}))
    config = ProviderConfig(name="p", model="m", base_url="http://fake.test/v1")
    messages = []
    async with ResponsesClient(config, transport=httpx.ASGITransport(app=scripted_provider)) as client:
        for _ in range(3):
            with pytest.raises(ProviderError) as caught:
                await client.compact(CompactRequest(model="m", input=[USER]))
            assert caught.value.kind is ErrorKind.BAD_RESPONSE
            messages.append(caught.value.message)
    assert "missing field `output`" in messages[0]
    assert "invalid type: sequence" in messages[1]
    assert "`output[0]`: invalid type: integer `1`" in messages[2]  # serde's words, as Codex shows them
    assert scripted_provider.remaining == 0
