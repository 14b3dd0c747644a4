"""A `sleep=` for code that backs off between retries (the compaction service, the provider clients): it records
each delay instead of waiting."""

from __future__ import annotations


class SleepRecorder(list):
    """Awaitable like `asyncio.sleep`; holds the delays it was asked to wait, in order."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)
