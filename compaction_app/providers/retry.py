"""Retry with exponential backoff (spec §6.2): 200 ms × 2^(attempt−1) × jitter in [0.9, 1.1).

A server's `Retry-After` (carried as `ProviderError.retry_after`) replaces the computed delay, capped at
`max_delay` so a misbehaving server cannot park a session for hours.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from compaction_app.engine.provider_errors import ErrorKind, ProviderError

T = TypeVar("T")

BASE_DELAY_SECONDS = 0.2
JITTER_LOW, JITTER_HIGH = 0.9, 1.1
DEFAULT_MAX_DELAY_SECONDS = 60.0

Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[int, ProviderError, float], object]


def backoff_delay(attempt: int, *, rng: random.Random | None = None) -> float:
    """Delay before retry number `attempt` (1-based): 200 ms × 2^(attempt−1) × U[0.9, 1.1) (spec §6.2)."""
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    jitter = (rng or random).uniform(JITTER_LOW, JITTER_HIGH)
    # uniform() may return the upper bound through rounding; the spec's interval is half-open.
    jitter = min(jitter, JITTER_HIGH - 1e-12)
    return BASE_DELAY_SECONDS * 2 ** (attempt - 1) * jitter


def retry_delay(error: ProviderError, attempt: int, *, rng: random.Random | None = None,
                max_delay: float = DEFAULT_MAX_DELAY_SECONDS) -> float:
    """The server's Retry-After when it gave one, else the backoff of spec §6.2."""
    if error.retry_after is not None:
        return min(max(0.0, error.retry_after), max_delay)
    return backoff_delay(attempt, rng=rng)


def is_request_retryable(error: ProviderError) -> bool:
    """HTTP request retries (spec §4.2 step 4, §6.2 remote v1): 5xx and transport/timeouts, never 429 or a bad 200."""
    if error.kind in (ErrorKind.TRANSPORT, ErrorKind.TIMEOUT):
        return True
    return error.http_status is not None and 500 <= error.http_status < 600


def is_retryable(error: ProviderError) -> bool:
    """Stream/turn retries (spec §6.2): every kind ErrorKind marks retryable."""
    return error.retryable


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    sleep: Sleep = asyncio.sleep,
    on_retry: OnRetry | None = None,
    should_retry: Callable[[ProviderError], bool] = is_retryable,
    rng: random.Random | None = None,
    max_delay: float = DEFAULT_MAX_DELAY_SECONDS,
) -> T:
    """Run `call` and retry it on ProviderErrors `should_retry` accepts, at most `max_retries` times (spec §6.2).

    Before retry n (1-based) `on_retry(n, error, delay)` is called (awaited if it returns an awaitable), then
    `sleep(delay)`. The last error is raised unchanged when retries run out or the error is not retryable.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except ProviderError as error:
            if attempt >= max_retries or not should_retry(error):
                raise
            attempt += 1
            delay = retry_delay(error, attempt, rng=rng, max_delay=max_delay)
            if on_retry is not None:
                result = on_retry(attempt, error, delay)
                if inspect.isawaitable(result):
                    await result
            await sleep(delay)
