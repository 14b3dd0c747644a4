"""Outbound answers are never inflated (issue 27): a provider or webhook answering with a Content-Encoding is
refused before its body is read, and every request asks for `identity`."""

from __future__ import annotations

import asyncio
import gzip

import httpx
import pytest

from compaction_app.engine.hooks import HookEvent, HookRunner, HookSpec, HookStatus
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.connection import Connection

BOMB = gzip.compress(bytes(16 * 1024 * 1024))  # 16 MiB of zeros in about 16 KB


def _gzip_answer(seen: list):
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("accept-encoding"))
        return httpx.Response(200, content=BOMB, headers={"Content-Encoding": "gzip",
                                                          "Content-Type": "application/json"})
    return answer


@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_answer_with_a_content_encoding_is_refused_unread(stream):
    seen: list = []
    connection = Connection(ProviderConfig(name="p", model="m", base_url="https://provider.example.invalid/v1"),
                            transport=httpx.MockTransport(_gzip_answer(seen)))

    async def call():
        try:
            if stream:
                async with connection.stream_post("/responses", {"input": []}):
                    pass
            else:
                await connection.post_json("/responses/compact", {"input": []})
        finally:
            await connection.aclose()

    with pytest.raises(ProviderError) as raised:
        asyncio.run(call())
    assert raised.value.kind is ErrorKind.BAD_RESPONSE and "Content-Encoding 'gzip'" in raised.value.message
    assert seen == ["identity"]


def test_a_webhook_answer_with_a_content_encoding_fails_the_hook_unread():
    seen: list = []
    spec = HookSpec(name="h", event="pre_compact", kind="webhook", target="https://hooks.example.invalid/pre",
                    timeout=10.0)
    runner = HookRunner([spec], transport=httpx.MockTransport(_gzip_answer(seen)))
    (record,) = asyncio.run(runner.run(HookEvent.PRE_COMPACT, {"trigger": "manual"}, lambda event: None)).records
    assert record.status is HookStatus.FAILED and "compressed" in record.error
    assert seen == ["identity"]
