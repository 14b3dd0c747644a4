"""Operator actions on gateway sessions (issue 29): pause and resume.

A paused gateway session's next requests are refused with 403 `session_paused` and a message Codex shows its user,
before anything is forwarded; resuming lets them through again. The proxy reads the flag per request, through a
cache of `PAUSE_CACHE_SECONDS` (so a pause takes effect within that time in every process).
"""

from __future__ import annotations

import time

from gateway_app.models import GatewaySession

PAUSE_CACHE_SECONDS = 2.0

_paused: dict[tuple[int, str], tuple[float, str | None]] = {}


def do_set_paused(*, session_id: int, paused: bool, actor) -> GatewaySession:
    gs = GatewaySession.objects.get(session_id=session_id)
    gs.paused = paused
    gs.paused_by = actor.get_username() if paused and actor is not None else ""
    gs.save(update_fields=["paused", "paused_by", "updated"])
    _paused.clear()  # this process sees it at once
    return gs


UNKNOWN = object()


def cached_paused(*, route_id: int, group: str):
    """What `paused_message` said within the last PAUSE_CACHE_SECONDS, or UNKNOWN (no database: the proxy reads
    this on the event loop and goes to the database only when it is UNKNOWN)."""
    if not group:
        return None
    cached = _paused.get((route_id, group))
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    return UNKNOWN


def paused_message(*, route_id: int, group: str) -> str | None:
    """Why requests of this Codex session are refused now, or None (sync; cached)."""
    if not group:
        return None
    now = time.monotonic()
    cached = _paused.get((route_id, group))
    if cached is not None and cached[0] > now:
        return cached[1]
    row = GatewaySession.objects.filter(route_id=route_id, group_key=group, paused=True).values(
        "session_id", "paused_by").first()
    message = None if row is None else (
        f"compactweb: an operator ({row['paused_by'] or 'unknown'}) paused this session (#{row['session_id']}); "
        "ask them to resume it, or start a new session")
    if len(_paused) > 10_000:
        _paused.clear()
    _paused[(route_id, group)] = (now + PAUSE_CACHE_SECONDS, message)
    return message
