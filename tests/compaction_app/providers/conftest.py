"""Fixtures for provider tests (and for anyone who needs a fake model server).

- `scripted_provider`: an empty ScriptedProvider (tests/fakes/scripted_provider.py); add replies with `.add(...)`.
- `scripted_http`: (provider, base_url) with the provider served on 127.0.0.1 for the duration of the test.
- `sleeps`: a list that records every delay passed to the injected `record_sleep` (no real waiting).
- `backend`: the contract-test backend, parametrised over the embedded simulator (ASGI transport) and the scripted
  fake HTTP server; `backend.client(scenario, times=...)` arranges a scenario and returns a ResponsesClient.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import httpx
import pytest

from compaction_app.providers.client import ResponsesClient
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.simulated.app import create_app
from tests.fakes import scripted_provider as sp
from tests.fakes.sleeps import SleepRecorder

USER_MSG = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def scripted_provider() -> sp.ScriptedProvider:
    return sp.ScriptedProvider()


@pytest.fixture
def scripted_http(scripted_provider) -> Iterator[tuple[sp.ScriptedProvider, str]]:
    with scripted_provider.serve() as base_url:
        yield scripted_provider, base_url


# What the scripted server answers for each contract scenario: the same wire shapes the simulator produces.
def _scripted_replies(scenario: str) -> list[sp.Reply]:
    turn = [sp.created(), sp.output_text_delta("hel"), sp.output_text_delta("lo"),
            sp.output_item_done(sp.assistant("hello")), sp.completed(input_tokens=12, output_tokens=3)]
    v2_head = [sp.created(), sp.output_item_done(sp.assistant("Compacting."))]
    v2_done = sp.completed(input_tokens=40, output_tokens=9, cached_tokens=0)
    table = {
        "turn": [sp.Reply.sse(turn)],
        "compact": [sp.Reply.json(200, {"id": "c1", "object": "response.compaction",
                                        "output": [USER_MSG, sp.compaction("abc")],
                                        "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25}})],
        "v2": [sp.Reply.sse([*v2_head, sp.output_item_done(sp.compaction("abc"), 1), v2_done])],
        "v2_zero": [sp.Reply.sse([*v2_head, v2_done])],
        "v2_two": [sp.Reply.sse([*v2_head, sp.output_item_done(sp.compaction("a"), 1),
                                 sp.output_item_done(sp.compaction("b"), 2), v2_done])],
        "overloaded": [sp.Reply.error(429, {"error": {"code": "rate_limit_exceeded", "message": "slow down"}},
                                      headers={"Retry-After": "1"})],
        "overloaded;status=503;retry_after=3": [
            sp.Reply.error(503, {"error": {"code": "server_is_overloaded", "message": "overloaded"}},
                           headers={"Retry-After": "3"})],
        "overloaded;status=503": [
            sp.Reply.error(503, {"error": {"code": "server_is_overloaded", "message": "overloaded"}})],
        "server_error": [sp.Reply.error(500, {"error": {"code": "server_error", "message": "boom"}})],
        "context_window_exceeded": [
            sp.Reply.error(400, {"error": {"code": "context_length_exceeded", "message": "too long"}})],
        "stream_closed": [sp.Reply.sse(turn, close_after=4)],
        "compact_malformed": [sp.Reply.json(200, {"output": "not a list"})],
        "bad_json": [sp.Reply.raw(200, b"{this is not json", headers={"Content-Type": "application/json"})],
    }
    return table[scenario]


SUCCESS_FOR = {"compact": "compact", "turn": "turn", "v2": "v2"}


class SimulatedBackend:
    name = "simulated"

    def __init__(self, sleep: SleepRecorder) -> None:
        self.app = create_app()
        self.sleep = sleep

    def client(self, scenario: str | None = None, *, times: int | None = None, then: str | None = None,
               **config) -> ResponsesClient:
        """`scenario` is a fault (X-Sim-Fault value) or None; `times`/`then` limit it to n requests."""
        headers = {}
        if scenario:
            headers["X-Sim-Fault"] = scenario + (f";times={times}" if times is not None else "")
        cfg = ProviderConfig(name="contract", model="m", base_url="http://sim.test/v1", extra_headers=headers,
                             **config)
        return ResponsesClient(cfg, transport=httpx.ASGITransport(app=self.app), sleep=self.sleep,
                               rng=random.Random(7))


class ScriptedBackend:
    name = "scripted_http"

    def __init__(self, provider: sp.ScriptedProvider, base_url: str, sleep: SleepRecorder) -> None:
        self.provider = provider
        self.base_url = base_url
        self.sleep = sleep

    def client(self, scenario: str | None = None, *, times: int | None = None, then: str | None = None,
               **config) -> ResponsesClient:
        """Script `scenario` (`times` times, then the success reply `then`), or the success reply `then` alone."""
        if scenario:
            for _ in range(times or 1):
                self.provider.add(*_scripted_replies(scenario))
        if then:
            self.provider.add(*_scripted_replies(then))
        cfg = ProviderConfig(name="contract", model="m", base_url=self.base_url, **config)
        return ResponsesClient(cfg, sleep=self.sleep, rng=random.Random(7))


@pytest.fixture(params=["simulated", "scripted_http"])
def backend(request, sleeps, scripted_provider):
    if request.param == "simulated":
        yield SimulatedBackend(sleeps)
        return
    with scripted_provider.serve() as base_url:
        yield ScriptedBackend(scripted_provider, base_url, sleeps)
