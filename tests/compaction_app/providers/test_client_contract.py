"""One client test suite, run against the embedded simulator (ASGI) and the scripted fake server (real HTTP)."""

from __future__ import annotations

import pytest

from compaction_app.engine.port import CompactRequest, ResponsesRequest
from compaction_app.engine.provider_errors import ErrorKind, ProviderError

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
ASSISTANT = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}


async def _collect(client, request):
    return [event async for event in client.stream_response(request)]


@pytest.mark.asyncio
async def test_streamed_turn_yields_created_deltas_items_then_completed_with_usage(backend):
    async with backend.client(then="turn") as client:
        events = await _collect(client, ResponsesRequest(model="m", input=[USER]))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_item.done" in kinds
    items = [e.item for e in events if e.type == "response.output_item.done"]
    message = next(i for i in items if i["type"] == "message")
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == message["content"][0]["text"]
    usage = events[-1].usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


@pytest.mark.asyncio
async def test_compact_returns_retained_user_messages_and_one_compaction_item(backend):
    async with backend.client(then="compact") as client:
        result = await client.compact(CompactRequest(model="m", input=[USER, ASSISTANT]))
    kinds = [i["type"] for i in result.output]
    assert kinds == ["message", "compaction"]
    assert result.output[0] == USER
    assert isinstance(result.output[1]["encrypted_content"], str) and result.output[1]["encrypted_content"]
    assert result.usage is not None and result.usage.input_tokens > 0


@pytest.mark.asyncio
async def test_v2_trigger_stream_has_exactly_one_compaction_item_and_usage(backend):
    async with backend.client(then="v2") as client:
        events = await _collect(client, ResponsesRequest(model="m", input=[USER, {"type": "compaction_trigger"}]))
    items = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i["type"] for i in items].count("compaction") == 1
    assert events[-1].type == "response.completed"
    assert events[-1].usage.input_tokens > 0 and events[-1].usage.output_tokens > 0


@pytest.mark.asyncio
@pytest.mark.parametrize("fault, count", [("v2_zero", 0), ("v2_two", 2)])
async def test_v2_fault_streams_the_wrong_number_of_compaction_items(backend, fault, count):
    async with backend.client(fault) as client:
        events = await _collect(client, ResponsesRequest(model="m", input=[USER, {"type": "compaction_trigger"}]))
    items = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i["type"] for i in items].count("compaction") == count
    assert events[-1].type == "response.completed"


STREAM_FAULTS = [
    # fault, kind, http_status, retryable, retry_after
    ("overloaded", ErrorKind.SERVER_OVERLOADED, 429, True, 1.0),
    ("overloaded;status=503", ErrorKind.SERVER_OVERLOADED, 503, True, None),
    ("overloaded;status=503;retry_after=3", ErrorKind.SERVER_OVERLOADED, 503, True, 3.0),
    ("server_error", ErrorKind.SERVER_ERROR, 500, True, None),
    ("context_window_exceeded", ErrorKind.CONTEXT_WINDOW_EXCEEDED, 400, False, None),
    ("stream_closed", ErrorKind.STREAM_CLOSED, None, True, None),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("fault, kind, status, retryable, retry_after", STREAM_FAULTS)
async def test_stream_faults_are_classified(backend, fault, kind, status, retryable, retry_after):
    async with backend.client(fault) as client:
        with pytest.raises(ProviderError) as caught:
            await _collect(client, ResponsesRequest(model="m", input=[USER]))
    error = caught.value
    assert (error.kind, error.http_status, error.retryable, error.retry_after) == (kind, status, retryable,
                                                                                  retry_after)
    if fault == "stream_closed":
        assert error.message == "stream closed before response.completed"
    if kind is ErrorKind.CONTEXT_WINDOW_EXCEEDED:
        assert error.code == "context_length_exceeded"


@pytest.mark.asyncio
async def test_compact_retries_server_errors_with_backoff_then_succeeds(backend, sleeps):
    async with backend.client("server_error", times=2, then="compact") as client:
        result = await client.compact(CompactRequest(model="m", input=[USER]))
    assert [i["type"] for i in result.output][-1] == "compaction"
    assert len(sleeps) == 2
    assert 0.18 <= sleeps[0] < 0.22 and 0.36 <= sleeps[1] < 0.44  # 200ms × 2^(n−1) × [0.9, 1.1)


@pytest.mark.asyncio
async def test_compact_honours_retry_after_on_503(backend, sleeps):
    async with backend.client("overloaded;status=503;retry_after=3", times=1, then="compact") as client:
        result = await client.compact(CompactRequest(model="m", input=[USER]))
    assert result.output[-1]["type"] == "compaction"
    assert sleeps == [3.0]


@pytest.mark.asyncio
async def test_compact_gives_up_after_request_max_retries(backend, sleeps):
    async with backend.client("server_error", times=3, request_max_retries=2) as client:
        with pytest.raises(ProviderError) as caught:
            await client.compact(CompactRequest(model="m", input=[USER]))
    assert caught.value.kind is ErrorKind.SERVER_ERROR and caught.value.http_status == 500
    assert len(sleeps) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("fault, kind, status", [
    ("overloaded", ErrorKind.SERVER_OVERLOADED, 429),
    ("context_window_exceeded", ErrorKind.CONTEXT_WINDOW_EXCEEDED, 400),
])
async def test_compact_does_not_retry_429_or_400(backend, sleeps, fault, kind, status):
    async with backend.client(fault, times=1, then="compact") as client:
        with pytest.raises(ProviderError) as caught:
            await client.compact(CompactRequest(model="m", input=[USER]))
    assert (caught.value.kind, caught.value.http_status) == (kind, status)
    assert sleeps == []


@pytest.mark.asyncio
@pytest.mark.parametrize("fault, fragments", [
    ("compact_malformed", ["`output`: invalid type: string", "expected a sequence"]),
    ("bad_json", ["body is not JSON"]),
])
async def test_compact_bad_body_is_a_bad_response_and_is_not_retried(backend, sleeps, fault, fragments):
    async with backend.client(fault, times=1, then="compact") as client:
        with pytest.raises(ProviderError) as caught:
            await client.compact(CompactRequest(model="m", input=[USER]))
    assert caught.value.kind is ErrorKind.BAD_RESPONSE and not caught.value.retryable
    assert all(fragment in caught.value.message for fragment in fragments), caught.value.message
    assert sleeps == []
