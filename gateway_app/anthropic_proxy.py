"""The gateway's Anthropic Messages endpoints (issue 44): Claude Code -> compactweb -> the route's upstream.

    POST /gateway/anthropic/v1/messages               streamed (SSE) or JSON, passed through as it arrives
    POST /gateway/anthropic/v1/messages/count_tokens  passed through, not recorded

and the same under /gateway/r/<route>/anthropic/... A Claude Code user sets `ANTHROPIC_BASE_URL` to
`https://<host>/gateway/r/<route>/anthropic` and the gateway key as `ANTHROPIC_API_KEY` (sent as `x-api-key`) or
`ANTHROPIC_AUTH_TOKEN` (sent as the bearer). The route's Provider must speak the Messages API (wire API
`anthropic`; its base URL is what `ANTHROPIC_BASE_URL` would be); its key goes upstream as `x-api-key`.

Everything the Responses gateway does before forwarding is the same code (`proxy`): the key and its route, the
unknown-key limit per address, the route's requests per minute, its body limit, an operator's pause; and what it
does after: the answer reaches the client chunk by chunk, and the recorder writes the exchange into the caller's
own session (route, key and Claude Code's session id, `anthropic_wire.group_key`), off the stream. Claude Code's
summary request (its compaction) is, per route: forwarded and recorded as a compaction whose call tokens are its
summary requests' usage (`upstream`), or answered with the route policy's summary (`compactweb`,
`anthropic_compaction`). Errors go to Claude Code in Anthropic's error shape.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx

from compaction_app.engine.unicode_text import LONE_SURROGATE, has_lone_surrogate
from compactweb import gateway_metrics
from gateway_app import (
    anthropic_compaction,
    anthropic_wire,
    compaction,
    journal,
    limits,
    lookups,
    operator,
    proxy,
    recording,
    steering,
    upstream,
    wire,
)
from gateway_app.models import GatewayRoute

# Request headers an upstream Messages API reads (the version and betas Claude Code asks for, its client name);
# never the client's key or cookies.
FORWARDED = frozenset({"accept", "content-type", "user-agent", "anthropic-version", "anthropic-beta", "x-app"})
FORWARDED_PREFIXES = ("x-stainless-", "x-claude-code-", "x-sim-")  # x-sim-: the simulated model's faults
RETURNED = frozenset({"content-type", "cache-control", "retry-after", "request-id", "x-should-retry"})
RETURNED_PREFIXES = ("anthropic-",)
ANTHROPIC_VERSION = "2023-06-01"
# The Messages wire for the gateway's one stream pump (proxy.relay): its ending events, and the `error` event that
# ends a stream the upstream cut short.
MESSAGES = proxy.StreamWire(end=anthropic_wire.STREAM_END, failed_event=anthropic_wire.error_event,
                            unended="the upstream stream closed before message_stop")


def handles(path: str) -> bool:
    """Whether a gateway path (after /gateway) is one of the Anthropic endpoints."""
    if path.startswith(proxy.ROUTE_PREFIX):
        _, _, rest = path[len(proxy.ROUTE_PREFIX):].partition("/")
        path = "/" + rest
    return path.startswith("/anthropic/")


async def dispatch(scope, receive, send) -> None:
    """The gateway's ASGI app: the Anthropic endpoints here, everything else the Responses gateway's."""
    if scope["type"] == "http" and handles(scope.get("path", "")):
        await app(scope, receive, send)
    else:
        await proxy.app(scope, receive, send)


async def send_error(send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    body = anthropic_wire.error_body(status, message)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _credentials(headers: dict[str, str]) -> tuple[dict[str, str], str]:
    """(headers for proxy.authenticate, the client's own key): the gateway key is the x-compactweb-gateway-key
    header when sent (then x-api-key or the bearer is the client's own, for a route that passes it through), else
    x-api-key (ANTHROPIC_API_KEY), else the bearer (ANTHROPIC_AUTH_TOKEN)."""
    scheme, _, bearer = headers.get("authorization", "").strip().partition(" ")
    bearer = bearer.strip() if scheme.lower() == "bearer" else ""
    api_key = headers.get("x-api-key", "").strip()
    gateway_key = headers.get(proxy.GATEWAY_KEY_HEADER, "").strip()
    if gateway_key:
        return {proxy.GATEWAY_KEY_HEADER: gateway_key}, api_key or bearer
    return {"authorization": f"Bearer {api_key or bearer}"} if api_key or bearer else {}, ""


async def _admit(scope, headers: dict[str, str], send) -> tuple[proxy.Caller, str] | None:
    path = scope.get("path", "")
    route_name = ""
    if path.startswith(proxy.ROUTE_PREFIX):
        route_name, _, rest = path[len(proxy.ROUTE_PREFIX):].partition("/")
        path = "/" + rest
    endpoint = anthropic_wire.ENDPOINTS.get(path.rstrip("/"))
    if endpoint is None:
        await send_error(send, 404, f"no gateway route for {path}")
        return None
    if scope.get("method") != "POST":
        await send_error(send, 405, "use POST", headers={"Allow": "POST"})
        return None
    presented, own = _credentials(headers)
    try:
        caller = await proxy.authenticate(presented, route_name, (scope.get("client") or ("",))[0] or "")
    except proxy.TooManyFailedKeys:
        await send_error(send, 429, f"more than {limits.FAILED_KEYS_PER_MINUTE} unknown gateway keys from this "
                         "address this minute; try again after it", headers={"Retry-After": str(limits.retry_after())})
        return None
    if caller is None:
        await send_error(send, 401, "the gateway needs a gateway key (a route's, or your own under "
                         "/gateway/r/<route>/anthropic) as ANTHROPIC_API_KEY (docs/gateway.md)")
        return None
    if caller.pass_bearer and own:
        caller = dataclasses.replace(caller, client_bearer=own)
    gateway_metrics.admitted(scope, route=caller.route_name, mode=caller.mode)
    if caller.config.wire_api != "anthropic":
        await send_error(send, 404, f"route {caller.route_name}'s upstream does not speak Anthropic's Messages API; "
                         "use the route's /v1 base URL with Codex, or a route whose Provider's wire API is anthropic")
        return None
    if not await limits.allow(route_id=caller.route_id, per_minute=caller.requests_per_minute):
        await send_error(send, 429, f"route {caller.route_name} allows {caller.requests_per_minute} requests per "
                         "minute", headers={"Retry-After": str(limits.retry_after())})
        return None
    return caller, endpoint


async def _receive(receive, headers: dict[str, str], caller: proxy.Caller, send) -> tuple[bytes, dict] | None:
    try:
        raw = await proxy._read_body(receive, headers, caller.max_body_bytes)
        body = anthropic_wire.parse_body(raw)
        if has_lone_surrogate(raw, body):
            raise wire.BadRequest(f"the request body holds {LONE_SURROGATE}")
        return raw, body
    except proxy._TooLarge:
        await send_error(send, 413, f"the request body is larger than route {caller.route_name}'s "
                         f"{caller.max_body_bytes} bytes")
    except proxy._Gone:
        pass
    except wire.BadRequest as exc:
        await send_error(send, 400, str(exc))
    return None


async def app(scope, receive, send) -> None:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    admitted = await _admit(scope, headers, send)
    if admitted is None:
        return
    caller, endpoint = admitted
    received = await _receive(receive, headers, caller, send)
    if received is None:
        return
    raw, body = received
    if endpoint == anthropic_wire.COUNT_TOKENS:
        await _forward(caller, endpoint, headers, raw, None, receive, send)
        return
    try:
        items = anthropic_wire.items_of(body)
    except wire.BadRequest as exc:
        await send_error(send, 400, str(exc))
        return
    claude_session = anthropic_wire.claude_session(body, headers)
    group = anthropic_wire.group_key(claude_session)
    control = operator.cached_control(route_id=caller.route_id, key_id=caller.key_id, group=group)
    if control is operator.UNKNOWN:
        control = await lookups.run(operator.control_of, route_id=caller.route_id, key_id=caller.key_id, group=group)
    if control.paused_message:
        await send_error(send, 403, control.paused_message)
        return
    # The operator's decisions reach the upstream as for Codex (gateway_app.steering): substitutions (a compaction
    # the gateway ran at a request, support's rollback of one) and pins. Claude Code's `system` is its base
    # instructions, never in `messages`.
    steered = steering.steered(items, has_instructions=True, rules=control.substitutions,
                               block=control.pins_block, placed=control.pins_placed)
    changed = steered is not None
    if changed:
        body["messages"] = anthropic_wire.steered_messages(body, steered)
        items = anthropic_wire.items_of(body)  # what the upstream receives is what is recorded
    kind = anthropic_wire.request_kind(items)
    exchange = dict(route_id=caller.route_id, key_id=caller.key_id, client_name=caller.client_name, group=group,
                    endpoint=endpoint, kind=kind, meta=anthropic_wire.turn_metadata(claude_session),
                    model=str(body.get("model") or ""), client_provider="anthropic",
                    base_instructions=anthropic_wire.base_instructions(body),
                    history=anthropic_wire.history_of(items, kind))
    if control.compact_requested and kind == wire.TURN:  # an operator asked: the policy compacts, then it goes on
        history = await proxy._compact_first(exchange, control)
        body["messages"] = anthropic_wire.steered_messages(body, history)
        exchange["history"] = anthropic_wire.history_of(anthropic_wire.items_of(body), kind)
        changed = True
    if changed:
        raw = json.dumps(body).encode("utf-8")
    if caller.mode == GatewayRoute.Mode.COMPACTWEB and kind == wire.COMPACTION_LOCAL:
        try:
            await anthropic_compaction.answer(caller, exchange, body, send)
            return
        except anthropic_compaction.Refusal as refusal:
            await send_error(send, refusal.status, str(refusal))
            return
        except compaction.ForwardInstead as forwarded:  # forwarded as in upstream mode, and recorded so
            exchange["fallback"] = str(forwarded)
    await _forward(caller, endpoint, headers, raw, exchange, receive, send)


def forwarded_headers(headers: dict[str, str], caller: proxy.Caller) -> dict[str, str]:
    """What the upstream gets: Claude Code's version and beta headers, the Provider's own headers, and the key
    (the client's own on a route that passes it through, else the Provider's) as `x-api-key`."""
    out = {k: v for k, v in headers.items() if k in FORWARDED or k.startswith(FORWARDED_PREFIXES)}
    out.setdefault("anthropic-version", ANTHROPIC_VERSION)
    out.update(caller.config.extra_headers)
    out.update(caller.config.env_headers())
    key = caller.client_bearer or caller.config.api_key()
    if key:
        out["x-api-key"] = key
    return out


def _returned(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
            if k.lower() in RETURNED or k.lower().startswith(RETURNED_PREFIXES)]


def upstream_url(caller: proxy.Caller, endpoint: str) -> str:
    base = "http://embedded.invalid/anthropic" if caller.config.is_embedded else caller.config.base_url.rstrip("/")
    return f"{base}/{anthropic_wire.UPSTREAM_PATHS[endpoint]}"


async def _forward(caller: proxy.Caller, endpoint: str, headers: dict[str, str], raw: bytes,
                   exchange: dict[str, Any] | None, receive, send) -> None:
    """Forward to the upstream and pass its answer on as it comes (the Responses gateway's stream path,
    `proxy.relay`, with Anthropic's end-of-stream events); the exchange is recorded afterwards (None: count_tokens,
    not recorded). A recorded exchange is journaled as the Responses gateway's are: noted as begun as it goes
    upstream, its whole record durable before the answer's end reaches Claude Code (gateway_app.journal), so a
    process killed mid-stream leaves a cut record and one killed after the end loses nothing."""
    config = caller.config
    began = journal.begin(exchange) if exchange is not None else None
    client = httpx.AsyncClient(transport=upstream._Refused(config.refused)) if config.refused \
        else upstream.client_for(config)
    request = client.build_request("POST", upstream_url(caller, endpoint), content=raw,
                                   headers=forwarded_headers(headers, caller))
    try:
        response = await client.send(request, stream=True)
    except httpx.HTTPError as exc:
        message = f"the upstream did not answer: {upstream.describe(exc)}"
        if exchange is not None:
            await proxy.schedule_record(recording.Exchange(**exchange, status=502, error=message), began)
        await send_error(send, 502, message)
        return
    status = response.status_code
    sse = "text/event-stream" in response.headers.get("content-type", "")
    answer_format = (anthropic_wire.SSE if sse else anthropic_wire.JSON) if 200 <= status < 300 else ""
    error, kept = await proxy.relay(response, _returned(response.headers), receive, send, MESSAGES,
                                    sse=answer_format == anthropic_wire.SSE, began=began, answer_format=answer_format)
    if exchange is not None:
        await proxy.schedule_record(recording.Exchange(**exchange, status=status, error=error, answer=tuple(kept),
                                                       answer_format=answer_format), began)
