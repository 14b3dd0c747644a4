"""PreCompact / PostCompact hooks (spec §7): Python callables named by dotted path, and webhooks.

A hook may stop the compaction with `{"continue": false, "stopReason": "..."}`. A hook that fails (raises, times out,
answers with an HTTP error, or cannot be found) is recorded as a failed run and does NOT stop the compaction.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from compaction_app.engine.content_encoding import ACCEPT_IDENTITY, compressed_encoding
from compaction_app.engine.events import Emit, HookCompleted, HookStarted
from compaction_app.engine.reasons import short_reason
from compaction_app.engine.vocabulary import HookEvent, HookKind, HookMatcher, HookStatus

DEFAULT_HOOK_TIMEOUT = 10.0
# Limits (issue 14): no hook holds a compaction longer than MAX_HOOK_TIMEOUT, and no webhook answer larger than
# DEFAULT_MAX_RESPONSE_BYTES is read or stored.
MAX_HOOK_TIMEOUT = 60.0
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024
# Issue 27: what a webhook answered is shown to operators only as the decision the engine reads (continue) and a
# short, single-line stop reason (engine/reasons.py); the rest of the body (whatever the target returns) is dropped.


def callable_allowed(path: str, prefixes: tuple[str, ...] | None) -> bool:
    """Whether a callable hook's dotted path starts with one of `prefixes` (None = no restriction)."""
    if prefixes is None:
        return True
    return any(path.startswith(prefix) for prefix in prefixes if prefix)






@dataclass(frozen=True)
class HookSpec:
    """One configured hook. `target` is a dotted path (`pkg.mod.func` or `pkg.mod:func`) or a webhook URL."""

    name: str
    event: HookEvent
    kind: HookKind
    target: str
    matcher: HookMatcher = HookMatcher.ANY
    timeout: float = DEFAULT_HOOK_TIMEOUT

    def __post_init__(self) -> None:
        object.__setattr__(self, "event", HookEvent(self.event))
        object.__setattr__(self, "kind", HookKind(self.kind))
        object.__setattr__(self, "matcher", HookMatcher(self.matcher))
        if not self.target:
            raise ValueError(f"hook {self.name!r} needs a target")
        if self.timeout <= 0:
            raise ValueError(f"hook {self.name!r} needs a positive timeout")
        # case-insensitive, as the outbound check that admitted it (issue 27: `HTTP://` is an http URL)
        if self.kind is HookKind.WEBHOOK and not self.target.lower().startswith(("http://", "https://")):
            raise ValueError(f"webhook hook {self.name!r} needs an http(s) URL")

    def matches(self, trigger: str) -> bool:
        """spec §7: matchers on the trigger (manual / auto), or any."""
        return self.matcher is HookMatcher.ANY or self.matcher.value == trigger


@dataclass(frozen=True)
class HookRunRecord:
    name: str
    event: HookEvent
    status: HookStatus
    stop_reason: str | None
    duration_ms: int
    output: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "event": str(self.event),
            "status": str(self.status),
            "stop_reason": self.stop_reason,
            "duration_ms": self.duration_ms,
            "output": self.output,
            "error": self.error,
        }


@dataclass(frozen=True)
class HookPhaseResult:
    stopped: bool
    stop_reason: str | None
    records: list[HookRunRecord] = field(default_factory=list)


def resolve_callable(path: str) -> Callable[..., Any]:
    """Import `pkg.mod.func` or `pkg.mod:func`."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not a dotted path to a callable")
    target = getattr(importlib.import_module(module_name), attr)
    if not callable(target):
        raise ValueError(f"{path!r} is not callable")
    return target


def _in_thread(func: Callable[[Any], Any], argument: Any) -> asyncio.Future:
    """Call `func(argument)` on a daemon thread and return a future of its result. A daemon thread of its own, not
    a shared pool: a hook that never returns (it outlived its timeout and was failed) holds no pool worker and does
    not keep the process from exiting."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled by the timeout
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = func(argument), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side, which records it
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop closed while the hook ran: nobody waits for it any more
            pass

    threading.Thread(target=target, name="compaction-hook", daemon=True).start()
    return future


def _stop_of(output: Any) -> tuple[bool, str | None]:
    if isinstance(output, dict) and output.get("continue") is False:
        reason = output.get("stopReason")
        return True, reason if isinstance(reason, str) else None
    return False, None


class HookRunner:
    """Runs the hooks of one event in configuration order and records each run (spec §7)."""

    def __init__(
        self,
        specs: list[HookSpec] | tuple[HookSpec, ...] = (),
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Callable[[str], Callable[..., Any]] = resolve_callable,
        monotonic: Callable[[], float] = time.monotonic,
        callable_prefixes: tuple[str, ...] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_timeout: float = MAX_HOOK_TIMEOUT,
        url_check: Callable[[str], str | None] | None = None,
    ) -> None:
        """`callable_prefixes`: the module prefixes a callable hook's path must start with (None = any);
        `max_response_bytes`: a larger webhook answer fails the hook; `max_timeout` caps every hook's timeout;
        `url_check(url)`: why a webhook target is refused now, or None (checked before every post)."""
        self.url_check = url_check
        self.specs = tuple(specs)
        self.callable_prefixes = callable_prefixes
        self.max_response_bytes = max_response_bytes
        self.max_timeout = max_timeout
        self._transport = transport
        self._resolve = resolver
        self._monotonic = monotonic

    async def run(self, event: HookEvent, request: dict[str, Any], emit: Emit) -> HookPhaseResult:
        """Run every hook of `event` whose matcher fits `request["trigger"]`. All run; the phase is stopped when
        any of them asked to stop, with the first stop reason."""
        records: list[HookRunRecord] = []
        stopped, stop_reason = False, None
        for spec in self.specs:
            if spec.event is not event or not spec.matches(request.get("trigger", "")):
                continue
            emit(HookStarted(name=spec.name, event=str(event)))
            record = await self._run_one(spec, request)
            emit(HookCompleted(name=spec.name, event=str(event), status=str(record.status),
                               stop_reason=record.stop_reason))
            records.append(record)
            if record.status is HookStatus.STOPPED and not stopped:
                stopped, stop_reason = True, record.stop_reason
        return HookPhaseResult(stopped, stop_reason, records)

    async def _run_one(self, spec: HookSpec, request: dict[str, Any]) -> HookRunRecord:
        start = self._monotonic()
        output: Any = None
        try:
            if spec.kind is HookKind.CALLABLE:
                output = await self._call(spec, request)
            else:
                output = await self._post(spec, request)
        except Exception as exc:  # noqa: BLE001 - any hook failure is recorded, never propagated
            message = "timed out" if isinstance(exc, TimeoutError | httpx.TimeoutException) else str(exc)
            return HookRunRecord(spec.name, spec.event, HookStatus.FAILED, None, self._ms(start),
                                 error=message or type(exc).__name__)
        stop, reason = _stop_of(output)
        status = HookStatus.STOPPED if stop else HookStatus.COMPLETED
        return HookRunRecord(spec.name, spec.event, status, reason, self._ms(start), output=output)

    def _timeout(self, spec: HookSpec) -> float:
        return min(spec.timeout, self.max_timeout)

    async def _call(self, spec: HookSpec, request: dict[str, Any]) -> Any:
        if not callable_allowed(spec.target, self.callable_prefixes):
            raise PermissionError(f"{spec.target!r} is outside the allowed hook modules "
                                  f"({', '.join(self.callable_prefixes or ()) or 'none allowed'})")
        func = self._resolve(spec.target)
        # A copy, so a hook cannot change what later hooks (or the engine) see.
        payload = json.loads(json.dumps(request))
        if inspect.iscoroutinefunction(func):
            return await asyncio.wait_for(func(payload), timeout=self._timeout(spec))
        # A synchronous hook runs on a thread of its own under the same timeout: the event loop (other sessions'
        # turns, live pages) keeps running while it works, and one that overruns is failed as timed out.
        result = await asyncio.wait_for(_in_thread(func, payload), timeout=self._timeout(spec))
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, timeout=self._timeout(spec))
        return result

    async def _post(self, spec: HookSpec, request: dict[str, Any]) -> Any:
        if self.url_check is not None:
            refused = self.url_check(spec.target)
            if refused:  # the deployment's outbound rule, again at send time (a row saved under an older rule)
                raise PermissionError(f"webhook target refused: {refused}")
        timeout = self._timeout(spec)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout) as client:
            # The whole exchange is bounded by the timeout, not only each read: a server trickling bytes cannot
            # hold the compaction longer.
            content = await asyncio.wait_for(self._read_capped(client, spec.target, request), timeout=timeout)
        if not content:
            return None
        try:
            return webhook_decision(json.loads(content))
        except ValueError:
            return None

    async def _read_capped(self, client: httpx.AsyncClient, url: str, request: dict[str, Any]) -> bytes:
        async with client.stream("POST", url, json=request, headers=ACCEPT_IDENTITY) as response:
            if response.status_code >= 400:
                raise RuntimeError(f"webhook answered HTTP {response.status_code}")
            if compressed_encoding(response.headers) is not None:  # never inflated (engine/content_encoding)
                raise RuntimeError("webhook answered with a compressed body; only uncompressed answers are read")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise RuntimeError(f"webhook answer larger than {self.max_response_bytes} bytes")
                chunks.append(chunk)
        return b"".join(chunks)

    def _ms(self, start: float) -> int:
        return max(0, int(round((self._monotonic() - start) * 1000)))


def webhook_decision(answer: Any) -> dict[str, Any] | None:
    """What is kept of a webhook's JSON answer: `continue` (a boolean) and a short `stopReason` (spec §7)."""
    if not isinstance(answer, dict):
        return None
    kept: dict[str, Any] = {}
    if isinstance(answer.get("continue"), bool):
        kept["continue"] = answer["continue"]
    if isinstance(answer.get("stopReason"), str):
        kept["stopReason"] = short_reason(answer["stopReason"])
    return kept or None


@dataclass(frozen=True, kw_only=True)
class HookContext:
    """What every hook of one compaction is told about it (spec §7): the same for its PreCompact and PostCompact
    hooks."""

    session_id: str
    turn_id: str
    cwd: str
    transcript_path: str | None
    trigger: str
    reason: str
    phase: str
    implementation: str


def hook_request(
    *, event: HookEvent, context: HookContext, model: str, status: str | None = None,
) -> dict[str, Any]:
    """The JSON a hook receives (spec §7, with the hooks-crate fields reason/phase/implementation; PostCompact
    also carries status)."""
    request: dict[str, Any] = {
        "session_id": context.session_id,
        "turn_id": context.turn_id,
        "cwd": context.cwd,
        "transcript_path": context.transcript_path,
        "model": model,
        "trigger": context.trigger,
        "hook_event_name": event.wire_name,
        "reason": context.reason,
        "phase": context.phase,
        "implementation": context.implementation,
    }
    if event is HookEvent.POST_COMPACT:
        request["status"] = status
    return request
