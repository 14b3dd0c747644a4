"""Backoff and the generic retry helper (spec §6.2)."""

from __future__ import annotations

import random

import pytest

from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.retry import backoff_delay, is_request_retryable, with_retries


@pytest.mark.parametrize("attempt, base", [(1, 0.2), (2, 0.4), (3, 0.8), (5, 3.2)])
def test_backoff_is_200ms_doubling_with_jitter_in_0_9_to_1_1(attempt, base):
    rng = random.Random(1)
    delays = [backoff_delay(attempt, rng=rng) for _ in range(500)]
    assert all(base * 0.9 <= d < base * 1.1 for d in delays)
    assert max(delays) - min(delays) > base * 0.15  # jitter is really applied


def test_backoff_rejects_attempt_zero():
    with pytest.raises(ValueError):
        backoff_delay(0)


def _failing(errors, result="ok"):
    calls = []

    async def call():
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return call, calls


@pytest.mark.asyncio
async def test_retries_retryable_errors_and_reports_each_retry(sleeps):
    call, calls = _failing([ProviderError(ErrorKind.SERVER_ERROR, "a"), ProviderError(ErrorKind.TRANSPORT, "b")])
    seen = []
    assert await with_retries(call, max_retries=5, sleep=sleeps, rng=random.Random(0),
                              on_retry=lambda n, e, d: seen.append((n, e.kind, d))) == "ok"
    assert len(calls) == 3
    assert [(n, k) for n, k, _ in seen] == [(1, ErrorKind.SERVER_ERROR), (2, ErrorKind.TRANSPORT)]
    assert [d for *_, d in seen] == sleeps


@pytest.mark.asyncio
async def test_does_not_retry_non_retryable_errors(sleeps):
    call, calls = _failing([ProviderError(ErrorKind.INVALID_REQUEST, "no")])
    with pytest.raises(ProviderError):
        await with_retries(call, max_retries=5, sleep=sleeps)
    assert len(calls) == 1 and sleeps == []


@pytest.mark.asyncio
async def test_stops_after_max_retries_with_the_last_error(sleeps):
    errors = [ProviderError(ErrorKind.SERVER_ERROR, str(i)) for i in range(4)]
    call, calls = _failing(errors)
    with pytest.raises(ProviderError) as caught:
        await with_retries(call, max_retries=3, sleep=sleeps)
    assert caught.value.message == "3" and len(calls) == 4 and len(sleeps) == 3


@pytest.mark.asyncio
async def test_retry_after_replaces_backoff_and_is_capped(sleeps):
    errors = [ProviderError(ErrorKind.SERVER_OVERLOADED, "x", retry_after=7.0),
              ProviderError(ErrorKind.SERVER_OVERLOADED, "y", retry_after=9999.0)]
    call, _ = _failing(errors)
    await with_retries(call, max_retries=3, sleep=sleeps, max_delay=60.0)
    assert sleeps == [7.0, 60.0]


@pytest.mark.asyncio
async def test_async_on_retry_is_awaited(sleeps):
    call, _ = _failing([ProviderError(ErrorKind.TIMEOUT, "t")])
    seen = []

    async def on_retry(n, error, delay):
        seen.append(n)

    await with_retries(call, max_retries=1, sleep=sleeps, on_retry=on_retry)
    assert seen == [1]


def test_request_retry_policy_is_5xx_and_transport_only():
    assert is_request_retryable(ProviderError(ErrorKind.SERVER_ERROR, "", http_status=500))
    assert is_request_retryable(ProviderError(ErrorKind.SERVER_OVERLOADED, "", http_status=503))
    assert is_request_retryable(ProviderError(ErrorKind.TIMEOUT, ""))
    assert not is_request_retryable(ProviderError(ErrorKind.SERVER_OVERLOADED, "", http_status=429))
    assert not is_request_retryable(ProviderError(ErrorKind.BAD_RESPONSE, ""))
    assert not is_request_retryable(ProviderError(ErrorKind.STREAM_CLOSED, ""))
