"""A scripted ModelClient for engine tests: records every request body, replays events, responses and errors."""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections import deque
from typing import Any

from compaction_app.engine.compactor import CompactionRequest, Effects, HistorySnapshot, run_compaction
from compaction_app.engine.hooks import HookRunner
from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.port import (
    CompactRequest,
    CompactResponse,
    ResponsesRequest,
    StreamEvent,
    Usage,
)
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.windows import WindowState


def done(item: dict[str, Any]) -> StreamEvent:
    return StreamEvent(type="response.output_item.done", item=item)


def completed(input_tokens: int = 0, output_tokens: int = 0, cached: int = 0) -> StreamEvent:
    usage = Usage(input_tokens=input_tokens, cached_input_tokens=cached, output_tokens=output_tokens,
                  total_tokens=input_tokens + output_tokens)
    return StreamEvent(type="response.completed", usage=usage, response_id="resp_1")


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def error(kind: ErrorKind, message: str = "boom", status: int | None = None,
          retry_after: float | None = None) -> ProviderError:
    return ProviderError(kind=kind, message=message, http_status=status, retry_after=retry_after)


class FakeClient:
    """`streams`: one entry per stream_response call: a ProviderError (raised when the stream opens) or a list of
    StreamEvents / ProviderErrors (an error in the list is raised at that point). `compacts`: one entry per
    compact call: a CompactResponse or a ProviderError."""

    model = "fake-model"

    def __init__(self, streams: list | None = None, compacts: list | None = None) -> None:
        self.streams = deque(streams or [])
        self.compacts = deque(compacts or [])
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def stream_response(self, request: ResponsesRequest):
        self.requests.append(("responses", copy.deepcopy(request.to_body())))
        if not self.streams:
            raise AssertionError("unexpected stream_response call")
        script = self.streams.popleft()
        return self._replay(script)

    async def _replay(self, script):
        if isinstance(script, ProviderError):
            raise script
        for entry in script:
            if isinstance(entry, ProviderError):
                raise entry
            yield entry

    async def compact(self, request: CompactRequest) -> CompactResponse:
        self.requests.append(("compact", copy.deepcopy(request.to_body())))
        if not self.compacts:
            raise AssertionError("unexpected compact call")
        entry = self.compacts.popleft()
        if isinstance(entry, ProviderError):
            raise entry
        return entry

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [body for _, body in self.requests]


# --- builders shared by the scenario tests ---------------------------------------------------------------




def msg(role: str, *texts: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": t} for t in texts]}


ENV = msg("user", "<environment_context>\n<cwd>/repo</cwd>\n</environment_context>")
DEV = msg("developer", "<permissions instructions>workspace-write</permissions instructions>")
INITIAL_CONTEXT = [msg("developer", "<permissions instructions>fresh</permissions instructions>"),
                   msg("user", "<environment_context>\n<cwd>/fresh</cwd>\n</environment_context>")]
OLD_SUMMARY = user_message(f"{SUMMARY_PREFIX}\nearlier work")
CALL = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "a.py\nb.py"}
REASONING = {"type": "reasoning", "summary": [], "encrypted_content": "enc"}

# A history with every kind that matters: injected context, real user messages, a summary, tool traffic.
HISTORY = [DEV, ENV, msg("user", "fix the bug"), REASONING, msg("assistant", "looking"), CALL, OUTPUT,
           OLD_SUMMARY, msg("user", "and add tests")]
WINDOW = WindowState(number=3, window_id="w3", first_window_id="w0", previous_window_id="w2")


def summary(text: str) -> dict[str, Any]:
    return user_message(f"{SUMMARY_PREFIX}\n{text}")


def make_settings(**overrides: Any) -> CompactionSettings:
    values: dict[str, Any] = dict(model="gpt-test", token_counter="codex_estimate", thread_id="thread-1",
                                  base_instructions="BASE", context_window=100_000)
    values.update(overrides)
    return CompactionSettings(**values)


def make_snapshot(items: list | None = None, **overrides: Any) -> HistorySnapshot:
    values: dict[str, Any] = dict(items=list(HISTORY if items is None else items), active_tokens=5_000,
                                  window=WINDOW, turn_id="turn-1", initial_context=list(INITIAL_CONTEXT),
                                  session_id="sess-1", cwd="/repo", transcript_path="/rollouts/sess-1.jsonl")
    values.update(overrides)
    return HistorySnapshot(**values)


class Recorder:
    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.events: list = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def run(*, snapshot: HistorySnapshot, settings: CompactionSettings, request: CompactionRequest,
        client: FakeClient | None, hooks: HookRunner | None = None, recorder: Recorder | None = None,
        **kwargs: Any):
    """Run one compaction with deterministic ids, clock and jitter."""
    recorder = recorder or Recorder()
    counter = itertools.count(1)
    ticks = itertools.count(0)
    return asyncio.run(run_compaction(
        snapshot=snapshot, settings=settings, request=request, client=client, hooks=hooks,
        emit=recorder.events.append, effects=Effects(
            sleep=recorder.sleep, clock=lambda: 1_000.0, monotonic=lambda: next(ticks) * 0.5, jitter=lambda: 1.0,
            new_id=lambda: f"window-{next(counter)}", new_item_id=lambda: "item-1",
        ), **kwargs,
    ))


def event_types(outcome) -> list[str]:
    return [e.type for e in outcome.events]
