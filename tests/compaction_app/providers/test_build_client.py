"""build_client picks the client by wire API and reaches the embedded simulator in-process."""

from __future__ import annotations

import pytest

from compaction_app.engine.port import ResponsesRequest
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.chat import ChatClient
from compaction_app.providers.client import ResponsesClient
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.factory import build_client

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "tell me about x.py " * 30}]}


@pytest.mark.asyncio
async def test_embedded_responses_provider_streams_in_process():
    async with build_client(ProviderConfig(name="e", model="m")) as client:
        assert isinstance(client, ResponsesClient)
        events = [e async for e in client.stream_response(ResponsesRequest(model="m", input=[USER]))]
    assert events[-1].type == "response.completed"


@pytest.mark.asyncio
async def test_embedded_provider_enforces_the_configured_context_window():
    async with build_client(ProviderConfig(name="e", model="m", context_window=20)) as client:
        with pytest.raises(ProviderError) as caught:
            [e async for e in client.stream_response(ResponsesRequest(model="m", input=[USER]))]
    assert caught.value.kind is ErrorKind.CONTEXT_WINDOW_EXCEEDED


@pytest.mark.asyncio
async def test_chat_wire_api_builds_the_chat_adapter():
    async with build_client(ProviderConfig(name="e", model="m", wire_api="chat")) as client:
        assert isinstance(client, ChatClient)
        events = [e async for e in client.stream_response(ResponsesRequest(model="m", input=[USER]))]
    assert events[-1].type == "response.completed"
