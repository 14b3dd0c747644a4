"""Build the ModelClient a ProviderConfig describes (issue 3)."""

from __future__ import annotations

import asyncio
import random
import threading

import httpx

from compaction_app.engine.port import ModelClient
from compaction_app.providers.anthropic_client import AnthropicClient
from compaction_app.providers.chat import ChatClient
from compaction_app.providers.client import ResponsesClient
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.in_process import InProcessTransport
from compaction_app.providers.retry import Sleep
from compaction_app.providers.simulated.app import SimulatedProvider, create_app
from compaction_app.providers.simulated.faults import FaultUse

_shared: dict[int | None, SimulatedProvider] = {}  # one embedded simulator per context window, per process
_shared_lock = threading.Lock()


def _shared_app(context_window: int | None) -> SimulatedProvider:
    with _shared_lock:
        app = _shared.get(context_window)
        if app is None:
            app = _shared[context_window] = create_app(context_window=context_window)
        return app


def embedded_fault_use(name: str, key: str) -> FaultUse | None:
    """How often the fault `name` with `key` fired on the embedded simulators of this process, and when it last
    did; None when it has not. Another process (a Celery worker) counts its own."""
    with _shared_lock:
        apps = list(_shared.values())
    uses = [u for u in (app.fault_counter.use(name, key) for app in apps) if u is not None]
    if not uses:
        return None
    return FaultUse(fired=sum(u.fired for u in uses), last_fired_at=max(u.last_fired_at for u in uses))


def embedded_transport(*, context_window: int | None = None, sleep: Sleep | None = None) -> httpx.ASGITransport:
    """An in-process transport to the simulated provider (no network, no server); request bodies are handed over
    as objects, not serialised (`in_process.InProcessTransport`).

    With the default sleep, every client of one context window shares one simulator instance per process, so
    counted faults (`times=n;key=k`) keep counting across clients; a custom `sleep` gets a fresh instance.
    """
    if sleep is None:
        return InProcessTransport(app=_shared_app(context_window))
    return InProcessTransport(app=create_app(context_window=context_window, sleep=sleep))


def build_client(
    config: ProviderConfig,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
) -> ModelClient:
    """A Responses or chat client for `config`; `base_url="embedded"` reaches the simulated provider in-process.

    The embedded simulator is told the provider's context window, so it fails over-long inputs with
    `context_length_exceeded` exactly as a real server with that window would. `sleep` is the backoff sleep of the
    client's request retries (tests inject a recorder).
    """
    if transport is None and config.is_embedded:
        transport = embedded_transport(context_window=config.context_window)
    if config.wire_api == "chat":
        return ChatClient(config, transport=transport)
    if config.wire_api == "anthropic":
        return AnthropicClient(config, transport=transport)
    return ResponsesClient(config, transport=transport, sleep=sleep, rng=rng)
