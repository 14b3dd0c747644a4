"""The gateway's ASGI app, mounted at /gateway (issue 29): Codex -> compactweb -> the route's upstream.

    POST /gateway/v1/responses           streamed (SSE) or JSON, passed through as it arrives
    POST /gateway/v1/responses/compact   remote v1 compaction
    GET  /gateway/v1/models              the upstream's model list
    websocket /gateway/...               refused with 426, so Codex falls back to HTTP at once (as /sim does)

Also under /gateway/r/<route>/v1/... (the route named: a user's own key works only there, on a route that allows
user keys).

In order: the route (a gateway key as the bearer, or in x-compactweb-gateway-key: 401 otherwise), the route's requests per minute (429), its body
limit (413), the body (400 unless a JSON object with an item list), compaction handles expanded (an unknown one is
400, never forwarded), then either compactweb's own compaction (compactweb mode, `compaction`) or the upstream.
Upstream answers reach the client chunk by chunk as they arrive, status and body unchanged, errors included. What
passed is recorded afterwards on one recorder thread per process (`recording`), in arrival order, off the stream:
a slow database delays the record, not the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings

from compaction_app.engine.errors import EngineErrorKind
from compaction_app.engine.lru import TtlLru
from compaction_app.engine.strategies.masking import NOTHING_TO_MASK
from compaction_app.engine.unicode_text import LONE_SURROGATE, has_lone_surrogate
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.simulated.app import refuse_websocket
from compactweb import gateway_metrics
from compactweb.roles import role_of
from gateway_app import (
    compaction,
    journal,
    keys,
    limits,
    lookups,
    operator,
    recorder,
    recording,
    steering,
    upstream,
    wire,
)
from gateway_app.models import GatewayRoute
from sessions_app.gateway_surface import (
    SHORT_OF_TARGET_KIND,
    CompactionFailed,
    CompactionRefused,
    provider_config,
)

logger = logging.getLogger(__name__)

MOUNT = "/gateway"
ENDPOINTS = {"/v1/responses": ("POST", "responses"), "/v1/responses/compact": ("POST", "responses/compact"),
             "/v1/models": ("GET", "models")}
CLIENT_GONE = recording.CLIENT_GONE
GATEWAY_KEY_HEADER = "x-compactweb-gateway-key"  # the gateway key, when the bearer is the client's own
ROUTE_PREFIX = "/r/"
# Compaction failures a retry cannot help (the policy has nothing left to do, its fallback cannot bring the
# history under the client's limit, or the engine says fatal).
UNRECOVERABLE = frozenset({NOTHING_TO_MASK, SHORT_OF_TARGET_KIND, EngineErrorKind.FATAL.value})
# What Codex is told when compactweb's own compaction failed (the model, the database): no exception text.
INTERNAL_COMPACTION_FAILURE = ("compactweb gateway could not compact this session (an internal failure; the attempt "
                               "is in the session's attempts); try again")


@dataclass(frozen=True)
class Caller:
    key_id: int
    client_name: str
    route_id: int
    route_name: str
    mode: str
    max_body_bytes: int
    requests_per_minute: int
    config: ProviderConfig
    pass_bearer: bool = False
    compaction_fallback: str = GatewayRoute.Fallback.SUMMARISE
    # The client's own bearer, to send upstream instead of the Provider's key (a route with pass_client_bearer,
    # the gateway key then in GATEWAY_KEY_HEADER). Lives in this request's memory only: never stored or logged.
    client_bearer: str = field(default="", repr=False)


KEYS_CACHED = 10_000  # keys (and unknown keys) remembered per process, least recently used dropped first


def _lookup(presented: str, route_name: str) -> Caller | None:
    row = keys.key_for(presented=presented)
    if row is None:
        return None
    if row.route_id is not None:
        route, client = row.route, row.client_name
        if route_name and route_name != route.name:
            return None  # a key of another route
    else:  # a user's own key: on a route named in the path that allows user keys, for a user with a role
        route = keys.user_key_route(name=route_name) if route_name else None
        if route is None or role_of(row.user) is None:
            return None
        client = f"{row.user.get_username()} ({row.client_name})"
    return Caller(key_id=row.pk, client_name=client, route_id=route.pk, route_name=route.name,
                  mode=route.compaction_mode, max_body_bytes=route.max_body_bytes,
                  requests_per_minute=route.requests_per_minute, pass_bearer=route.pass_client_bearer,
                  compaction_fallback=route.compaction_fallback,
                  config=provider_config(provider=route.provider, policy=route.policy))


class TooManyFailedKeys(Exception):
    pass


async def authenticate(headers: dict[str, str], route_name: str = "", address: str = "") -> Caller | None:
    """The caller of a gateway key, from GATEWAY_KEY_HEADER when sent (the bearer is then the client's own), else
    from the bearer; None when there is no live key. TooManyFailedKeys when the client's address sent more unknown
    keys this minute than limits.FAILED_KEYS_PER_MINUTE (the key is then not looked up)."""
    scheme, _, bearer = headers.get("authorization", "").strip().partition(" ")
    bearer = bearer.strip() if scheme.lower() == "bearer" else ""
    presented = headers.get(GATEWAY_KEY_HEADER, "").strip()
    own_bearer = bearer if presented else ""
    presented = presented or bearer
    if not presented:
        return None
    caller = await _caller_of(presented, route_name, address)
    if caller is not None and caller.pass_bearer and own_bearer:
        return dataclasses.replace(caller, client_bearer=own_bearer)
    return caller


def key_cache_seconds() -> float:
    """How long a process answers from its memory who a gateway key is: a revoked key, a disabled route or a user
    who lost their role stops working in every process within this time (COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS,
    1 s by default; issue 42: a leaked key's revocation should not wait 5 s, and one lookup per key per second
    costs nothing measurable)."""
    return float(getattr(settings, "COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS", 1.0))


# (the bound looked up at each put, through this module, as before the cache was a TtlLru)
_keys: TtlLru[tuple[str, str], Caller | None] = TtlLru(KEYS_CACHED, seconds=lambda: key_cache_seconds())
_UNCACHED = object()


async def _caller_of(presented: str, route_name: str, address: str) -> Caller | None:
    digest = (keys.digest_of(presented), route_name)
    read_at = _keys.now()
    cached = _keys.get(digest, _UNCACHED)
    if cached is not _UNCACHED:
        if cached is None:
            limits.failed_keys.note(address)
        return cached
    if limits.failed_keys.exceeded(address):
        raise TooManyFailedKeys
    caller = await lookups.run(_lookup, presented=presented, route_name=route_name)
    if caller is None:
        limits.failed_keys.note(address)
    if caller is not None:  # the write goes to the recorder's thread: authentication never waits behind one
        recorder.recorder.later(functools.partial(keys.do_touch_key, key_id=caller.key_id))
    _keys.put(digest, caller, read_at=read_at)  # (a revocation's bound counts from before the read)
    return caller


async def schedule_record(exchange: recording.Exchange, began: journal.Begun | None = None) -> None:
    """Queue the exchange's record. One noted as begun is first made durable in its journal row (a no-op when its
    stream's end already did: `_pump`), so a process killed from then on loses nothing of it; then it is the
    recorder's to finish, not the exit's (the record deletes the row)."""
    if began is not None:
        await began.noted()
        await began.ended(status=exchange.status, error=exchange.error, answer_format=exchange.answer_format,
                          answer=exchange.answer)
        if not began.journaled:  # the insert failed (logged): there is no row for the record to delete
            exchange = dataclasses.replace(exchange, begun=None)
    await recorder.recorder.put(exchange)
    if began is not None:
        journal.handed_over(began.token)


async def on_recorder(fn, /, **kwargs):
    """Run `fn` on the recorder thread, after every record scheduled before it."""
    return await recorder.recorder.run(functools.partial(fn, **kwargs))


def close_recorder_connections() -> None:
    """Close the recorder's, the lookups' and the rate counts' database connections (a test database is dropped after the tests)."""
    recorder.close_connections()
    lookups.close_connections()
    journal.close_connections()
    limits.close_connections()


async def drain() -> None:
    """Wait until every record scheduled so far is written (tests, and a clean shutdown)."""
    await recorder.recorder.run(lambda: None)


# -- HTTP plumbing ---------------------------------------------------------------------------------------------------


async def _start(send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def _send_error(send, status: int, code: str, message: str, *, kind: str = "invalid_request_error",
                      headers: dict[str, str] | None = None) -> None:
    body = upstream.error_body(code, message, kind=kind)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await _start(send, status, raw)
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_json(send, status: int, payload: Any, content_type: bytes = b"application/json") -> None:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    await _start(send, status, [(b"content-type", content_type), (b"content-length", str(len(body)).encode())])
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


async def _read_body(receive, headers: dict[str, str], limit: int) -> bytes:
    declared = headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


# -- the app ---------------------------------------------------------------------------------------------------------


async def app(scope, receive, send) -> None:
    if scope["type"] == "websocket":
        await refuse_websocket(scope, receive, send,
                               text="the compactweb gateway serves the Responses API over HTTP only")
        return
    if scope["type"] != "http":
        return
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    admitted = await _admit(scope, headers, send)
    if admitted is None:
        return
    caller, endpoint = admitted
    if endpoint == "models":
        await _forward_models(caller, headers, send)
        return
    received = await _receive_body(receive, headers, caller, send)
    if received is None:
        return
    raw, body = received
    meta = wire.turn_metadata(headers, body)
    kind = wire.request_kind(endpoint=endpoint, body=body, meta=meta)
    group = wire.group_key(meta=meta, body=body)
    control = operator.cached_control(route_id=caller.route_id, key_id=caller.key_id, group=group)
    if control is operator.UNKNOWN:
        control = await lookups.run(operator.control_of, route_id=caller.route_id, key_id=caller.key_id, group=group)
    if control.paused_message:
        await _send_error(send, 403, "session_paused", control.paused_message)
        return
    exchange = dict(route_id=caller.route_id, key_id=caller.key_id, client_name=caller.client_name,
                    group=group, endpoint=endpoint, kind=kind, meta=meta,
                    model=str(body.get("model") or ""), client_provider=wire.client_provider(headers),
                    client_version=wire.client_version(headers), client_source=wire.client_source(headers),
                    accepted=time.time())
    try:
        changed = await _rewrite_input(body, kind=kind, control=control, exchange=exchange)
    except compaction.UnknownHandle as exc:
        await schedule_record(recording.Exchange(**exchange, base_instructions="", history=[], status=400,
                                           error=str(exc)))
        await _send_error(send, 400, "unknown_compaction_handle", str(exc))
        return
    if changed:
        raw = json.dumps(body).encode("utf-8")
    if caller.mode == GatewayRoute.Mode.COMPACTWEB and kind in (wire.COMPACTION_V2, wire.COMPACTION_V1):
        forwarded = await _compactweb_compaction(caller, exchange, body, send)
        if forwarded is None:
            return
        exchange["fallback"] = forwarded  # the route forwards what its policy could not compact enough
    await _forward(caller, endpoint, headers, raw, exchange, receive, send)


async def _admit(scope, headers: dict[str, str], send) -> tuple[Caller, str] | None:
    """The caller and the endpoint of an HTTP request, or None once it is refused: no such endpoint (404), the
    wrong method (405), no live gateway key (401), the route's requests per minute spent (429)."""
    path = scope.get("path", "")
    route_name = ""
    if path.startswith(ROUTE_PREFIX):  # /r/<route>/v1/...: the route named (needed by a user's own key)
        route_name, _, rest = path[len(ROUTE_PREFIX):].partition("/")
        path = "/" + rest
    route = ENDPOINTS.get(path.rstrip("/") or "/")
    if route is None:
        await _send_error(send, 404, "not_found", f"no gateway route for {path}")
        return None
    method, endpoint = route
    if scope.get("method") != method:
        await _send_error(send, 405, "method_not_allowed", f"use {method}", headers={"Allow": method})
        return None
    try:
        caller = await authenticate(headers, route_name, (scope.get("client") or ("",))[0] or "")
    except TooManyFailedKeys:
        await _send_error(send, 429, "too_many_failed_keys",
                          f"more than {limits.FAILED_KEYS_PER_MINUTE} unknown gateway keys from this address this "
                          "minute; try again after it", kind="requests",
                          headers={"Retry-After": str(limits.retry_after())})
        return None
    if caller is None:
        await _send_error(send, 401, "invalid_api_key", "the gateway needs a gateway key (a route's, or your own at "
                          "/gateway/r/<route>/v1) as the bearer token (docs/gateway.md)", headers={"WWW-Authenticate": 'Bearer realm="compactweb-gateway"'})
        return None
    gateway_metrics.admitted(scope, route=caller.route_name, mode=caller.mode)
    if not await limits.allow(route_id=caller.route_id, per_minute=caller.requests_per_minute):
        await _send_error(send, 429, "rate_limit_exceeded",
                          f"route {caller.route_name} allows {caller.requests_per_minute} requests per minute",
                          kind="requests", headers={"Retry-After": str(limits.retry_after())})
        return None
    return caller, endpoint


async def _receive_body(receive, headers: dict[str, str], caller: Caller,
                        send) -> tuple[bytes, dict[str, Any]] | None:
    """The request body as sent and parsed, or None once it is refused (413 over the route's limit, 400 not a JSON
    object with an item list) or the client went away."""
    try:
        raw = await _read_body(receive, headers, caller.max_body_bytes)
        body = wire.parse_body(raw)
        if has_lone_surrogate(raw, body):
            raise wire.BadRequest(f"the request body holds {LONE_SURROGATE}")
        return raw, body
    except _TooLarge:
        await _send_error(send, 413, "request_too_large",
                          f"the request body is larger than route {caller.route_name}'s {caller.max_body_bytes} bytes")
    except _Gone:
        pass
    except wire.BadRequest as exc:
        await _send_error(send, 400, "invalid_request_error", str(exc))
    return None


async def _rewrite_input(body: dict[str, Any], *, kind: str, control: operator.Control,
                         exchange: dict[str, Any]) -> bool:
    """The request's input as it goes on, in place in `body`: compaction handles expanded (UnknownHandle for one
    that is not known), the operator's substitutions and pins applied, and the history compacted first when an
    operator asked for it; the exchange gets the base instructions and the history to record. Whether the body
    changed (it must then be encoded again)."""
    expanded = await compaction.expanded_input(items=body["input"], owner=compaction.Owner(
        route_id=exchange["route_id"], key_id=exchange["key_id"], group=exchange["group"]))
    changed = expanded is not None
    if changed:
        body["input"] = expanded
    has_instructions = bool(body.get("instructions"))
    steered = steering.steered(body["input"], has_instructions=has_instructions, rules=control.substitutions,
                               block=control.pins_block, placed=control.pins_placed)
    if steered is not None:
        body["input"], changed = steered, True
    base, _ = wire.split_base(body)
    exchange.update(base_instructions=base, history=wire.history_of(body, kind))
    if control.compact_requested and kind == wire.TURN:
        history = await _compact_first(exchange, control)
        base_items, _ = steering.split_input(body["input"], has_instructions=has_instructions)
        body["input"], changed = [*base_items, *history], True
        exchange["history"] = history
    return changed


async def _forward_models(caller: Caller, headers: dict[str, str], send) -> None:
    client, request = upstream.request(caller.config, "GET", "models", headers, bearer=caller.client_bearer)
    try:
        response = await client.send(request)
    except httpx.HTTPError as exc:
        await _send_error(send, 502, "upstream_unreachable", f"the upstream did not answer: {upstream.describe(exc)}",
                          kind="server_error")
        return
    await _start(send, response.status_code, upstream.returned_headers(response.headers))
    await send({"type": "http.response.body", "body": response.content, "more_body": False})


_END = object()


async def _coalesced(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The upstream's chunks, joined when several are ready at once. An upstream streams one HTTP chunk per SSE
    event and the HTTP client yields each as its own piece even when one socket read brought many; each send to the
    client costs the server the same whatever its size, so under load one send carries what piled up. A chunk
    that arrives alone goes on at once: no waiting, no added latency."""
    ready: deque = deque()
    wake = asyncio.Event()

    async def read() -> None:
        try:
            async for chunk in chunks:
                ready.append(chunk)
                wake.set()
        except BaseException as exc:  # raised again on the consumer's side
            ready.append(exc)
        finally:
            ready.append(_END)
            wake.set()

    reader = asyncio.get_running_loop().create_task(read())
    try:
        while True:
            await wake.wait()
            wake.clear()
            batch = []
            while ready:
                piece = ready.popleft()
                if piece is _END or isinstance(piece, BaseException):
                    if batch:
                        yield b"".join(batch)
                    if piece is _END:
                        return
                    raise piece
                batch.append(piece)
            if batch:
                yield batch[0] if len(batch) == 1 else b"".join(batch)
    finally:
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader


async def _forward(caller: Caller, endpoint: str, headers: dict[str, str], raw: bytes, exchange: dict[str, Any],
                   receive, send) -> None:
    # Noted as begun while it goes to the upstream (not waited for): a process killed from here on leaves a trace
    # the sweep turns into a cut record, or, once the answer ended, the whole record (journal).
    began = journal.begin(exchange)
    client, request = upstream.request(caller.config, "POST", endpoint, headers, raw, bearer=caller.client_bearer)
    try:
        response = await client.send(request, stream=True)
    except httpx.HTTPError as exc:
        message = f"the upstream did not answer: {upstream.describe(exc)}"
        await schedule_record(recording.Exchange(**exchange, status=502, error=message), began)
        await _send_error(send, 502, "upstream_unreachable", message, kind="server_error")
        return
    status = response.status_code
    answer_format = ""
    if 200 <= status < 300:
        answer_format = recording.SSE if "text/event-stream" in response.headers.get("content-type", "") \
            else recording.JSON
    error, kept = await relay(response, upstream.returned_headers(response.headers), receive, send, RESPONSES,
                              sse=answer_format == recording.SSE, began=began, answer_format=answer_format)
    await schedule_record(recording.Exchange(**exchange, status=status, error=error, answer=tuple(kept),
                                             answer_format=answer_format), began)


@dataclass(frozen=True)
class StreamWire:
    """What a wire's stream pump needs to know of it (issue 43: one pump for the Responses and Messages wires)."""

    end: re.Pattern[bytes]  # the events that end an answer, matched on the raw bytes
    failed_event: Callable[[str], bytes]  # the event that ends, for the client, a stream the upstream cut short
    unended: str  # the error of a stream that closed before its end


# The events that end a Responses stream, matched on the raw bytes (inside a JSON string a quote is escaped, so
# a model's text that mentions one does not match).
_STREAM_END = re.compile(rb'"type":\s*"(?:response\.(?:completed|failed|incomplete|done)|error)"')
RESPONSES = StreamWire(end=_STREAM_END, failed_event=wire.failed_event,
                       unended="the upstream stream closed before response.completed")


async def relay(response: httpx.Response, headers: list[tuple[bytes, bytes]], receive, send, stream: StreamWire, *,
                sse: bool, began: journal.Begun | None, answer_format: str) -> tuple[str, list[bytes]]:
    """Pass the upstream's answer on (status line, then `_pump`) while listening for the client's hang-up; the
    error that cut it ("" when whole, CLIENT_GONE on a hang-up) and the raw chunks passed, for the record. The
    upstream's stream is closed on the way out, at once on a hang-up."""
    # The stream's path does nothing per chunk but keep it and pass it on: the recorder reads the answer later.
    kept: list[bytes] = []
    # Daphne never fails a send to a client that hung up; it says so on `receive` (http.disconnect). Listening
    # for it while the stream runs is what stops the upstream at once (closing its stream) rather than reading,
    # and billing, an answer nobody gets.
    tasks: list[asyncio.Future] = []

    async def durable(error: str) -> None:  # the exchange's whole record, committed before the answer's end goes
        if began is not None:
            await began.ended(status=response.status_code, error=error, answer_format=answer_format, answer=kept)

    try:
        await _start(send, response.status_code, headers)
        hang_up = asyncio.ensure_future(_client_gone(receive))
        pump = asyncio.ensure_future(_pump(response, send, kept, stream, sse=sse, durable=durable))
        tasks += [pump, hang_up]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        error = pump.result() if pump.done() else CLIENT_GONE
    except Exception:  # the client went away before the status line could go
        error = CLIENT_GONE
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        await response.aclose()
    return error, kept


async def _client_gone(receive) -> None:
    """Returns when the client hangs up (its request body was read whole before: the server's next message is
    http.disconnect, ASGI spec). Any other message would be a server's mistake, and waiting on is all to do."""
    if (await receive())["type"] != "http.disconnect":
        await asyncio.get_running_loop().create_future()


async def _pump(response: httpx.Response, send, kept: list[bytes], stream: StreamWire, *, sse: bool,
                durable: Callable[[str], Awaitable[None]]) -> str:
    """Pass the upstream's answer on, chunk by chunk; the error that cut it ("" when it ended whole). A stream
    that broke, or closed before it ended (`stream.end`), is ended for the client with the wire's failure event,
    as the upstream's API fails a stream: never a clean end of a truncated one.

    Durable first (issue 41): the end of the answer goes to the client only once the exchange's whole record is
    committed (`durable`, the journal row's update): the event that ends a stream (what comes before it in its
    chunk goes on first, so an answer that arrives in one piece does not wait before its first byte), the last
    chunk of a JSON answer (each chunk goes on when the next arrives), or the failure event."""
    ended, tail, held = False, b"", None
    try:
        async for chunk in _coalesced(response.aiter_bytes()):
            kept.append(chunk)
            if not sse:  # the answer's end is the upstream's: hold the newest chunk until then
                chunk, held = held, chunk
            elif not ended:
                ended = stream.end.search(tail + chunk) is not None
                tail = chunk[-64:]
                if ended:
                    chunk = await _send_before_the_end(send, chunk, stream.end)
                    await durable("")
            if chunk is None:
                continue
            try:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except Exception:  # a server that does say so on send: stop reading the upstream too
                return CLIENT_GONE
    except httpx.HTTPError as exc:
        error = f"the upstream stream failed: {upstream.describe(exc)}"
    else:
        if ended or not sse:
            if not sse:
                await durable("")
            await send({"type": "http.response.body", "body": held or b"", "more_body": False})
            return ""
        error = stream.unended
    await durable(error)
    with contextlib.suppress(Exception):
        await send({"type": "http.response.body", "body": stream.failed_event(error) if sse else held or b"",
                    "more_body": False})
    return error


async def _send_before_the_end(send, chunk: bytes, end: re.Pattern[bytes] = _STREAM_END) -> bytes:
    """Send the events of `chunk` before the one that ends the stream (`end`: the wire's ending events); the rest
    (to send once it may go)."""
    found = end.search(chunk)
    split = chunk.rfind(b"\n\n", 0, found.start()) + 2 if found is not None else 1
    if split <= 1:  # the ending event starts the chunk (or began in the one before): nothing to send ahead
        return chunk
    await send({"type": "http.response.body", "body": chunk[:split], "more_body": True})
    return chunk[split:]


async def _compact_first(exchange: dict[str, Any], control: operator.Control) -> list[dict[str, Any]]:
    """An operator asked for a compaction at this request: the session's history brought up to the request's, the
    route policy's compaction run on it, and the history to forward instead (with the pins in force)."""
    gs = await on_recorder(compaction.record_history, exchange=recording.Exchange(**exchange, status=200),
                           counted=False)
    history, _ = await compaction.compact_first(gs=gs, history=exchange["history"])
    return steering.with_pins(history, control.pins_block)  # (the compaction placed the block as the policy says)


async def _compactweb_compaction(caller: Caller, exchange: dict[str, Any], body: dict[str, Any],
                                 send) -> str | None:
    """Answer Codex's compaction request with the route policy's compaction (None once answered), or the reason
    to forward it to the upstream instead (the route's fallback, `compaction.ForwardInstead`). The request is
    counted once, by whichever record ends it (the handle's, the forwarded exchange's or the failure's)."""
    ex = recording.Exchange(**exchange, status=200)
    try:
        gs = await on_recorder(compaction.record_history, exchange=ex, counted=False)
        item, before = await compaction.compact(gs=gs, history=ex.history, fallback=caller.compaction_fallback)
    except compaction.ForwardInstead as forward:
        return forward.reason
    except Exception as exc:  # history unchanged
        if isinstance(exc, CompactionRefused) or (isinstance(exc, CompactionFailed) and exc.kind in UNRECOVERABLE):
            # No retry can help: a 400 (not retried), whose message Codex shows its user as the gateway's reason.
            status, code, kind = 400, "compaction_refused", "invalid_request_error"
            message = (f"compactweb gateway: route {caller.route_name}'s policy cannot compact this session "
                       f"({exc}); start a new session, or ask an operator to change the route's policy")
            error = message
        else:  # the model or the database failed: as an upstream that failed (Codex retries)
            # Saying only that (issue 41/42: no server paths or secrets in messages): an exception's text can carry
            # a query, a host name or an upstream's answer; it is the operator's, in the attempt and the log.
            status, code, kind = 500, "compaction_failed", "server_error"
            message, error = INTERNAL_COMPACTION_FAILURE, f"compactweb gateway could not compact this session: {exc}"
        logger.info("gateway: compactweb compaction on route %s: %s", caller.route_name, error)
        await schedule_record(recording.Exchange(**exchange, status=status, error=error))
        await _send_error(send, status, code, message, kind=kind)
        return None
    usage = {"input_tokens": before, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": before}
    model = str(body.get("model") or caller.config.model)
    if ex.kind == wire.COMPACTION_V2 and body.get("stream") is False:  # one JSON response, as asked
        await _send_json(send, 200, {"id": "resp_" + item["id"], "object": "response", "status": "completed",
                                     "created_at": int(time.time()), "model": model, "output": [item],
                                     "usage": usage})
    elif ex.kind == wire.COMPACTION_V2:
        _, data = wire.sse_response(model=model, output=[item], usage=usage)
        await _send_json(send, 200, data, content_type=b"text/event-stream")
    else:
        await _send_json(send, 200, {"id": "resp_" + item["id"], "object": "response.compaction",
                                     "created_at": int(time.time()), "output": [item], "usage": usage})
