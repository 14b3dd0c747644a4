"""The gateway's journal of exchanges begun (issue 41, "no record lost"): an accepted exchange is durably noted
while it goes upstream, and its whole record is durable before its answer's end reaches the client (durable-first
recording), so a gateway process that dies at any point leaves either the exchange's full record or a `cut` one.

- `begin`: as the proxy forwards an exchange to the upstream, a GatewayInFlight row (a token, the caller, the
  endpoint, this process, and the exchange's request part as the recorder takes it) is inserted on the journal's
  own thread, at the same time as the upstream request: the stream never waits for it.
- `Begun.ended`: when the answer ends (the event that ends a stream, the end of a JSON answer, or the error that
  cut it), the row gets the answer's raw bytes and how it ended, on the same thread, and the answer's end goes to
  the client only once that is committed. Then the exchange is handed to the recorder as before.
- The exchange's record (gateway_app.recording) deletes the row in the transaction that writes the record: a row
  is there exactly while its exchange has no record, and a record whose row is gone was written already.
- `do_sweep_cut`: a row whose process ended is recorded whole when its answer had ended (the recorder's own
  `do_record_exchange` on the row's exchange: nothing the client received is lost); otherwise (the process died
  mid-stream) it turns into a GatewayAttempt with `cut` set (status 0, on the caller's gateway session when there
  is one, which counts it as a request), and nothing else is written: no history, no answer. A process is known to
  have ended when it ran on this host and its pid is gone, or when its row is older than CUT_AFTER_SECONDS (a
  process on another host). The sweep runs when a gateway process takes its first exchange (the process that was
  killed is restarted), with the scheduler's housekeeping, and with `manage.py gateway_sweep_cut`.
- At a clean exit (SIGTERM: Daphne stops, atexit), the exchanges still streaming are cut by the stop itself: they
  become cut records (or whole ones, when their answer had ended) after the queued records are written
  (`cut_at_exit`, before the recorder's drain).

The cost on the stream's path: one hand-over to a thread at the start, and the answer's end held for one UPDATE's
commit (docs/benchmarks.md, "Gateway journal").
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import datetime as dt
import functools
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compactweb.db_threads import DatabaseThread
from gateway_app import recorder, recording, selectors
from gateway_app.models import GatewayAttempt, GatewayInFlight, GatewaySession

logger = logging.getLogger(__name__)

HOST = socket.gethostname()[:100]
PROCESS = f"{HOST}:{os.getpid()}:{int(time.time())}"
CUT_AFTER_SECONDS = 3600.0  # no Responses stream lasts an hour: a row this old lost its process

_thread = DatabaseThread("compactweb-gateway-journal")
# Tokens of this process's exchanges begun and not yet handed to the recorder (the event loop's own).
_in_flight: set[uuid.UUID] = set()
_swept = False


def cut_after_seconds() -> float:
    return float(getattr(settings, "COMPACTWEB_GATEWAY_CUT_AFTER_SECONDS", CUT_AFTER_SECONDS))


class Begun:
    """One exchange's journal entry: its token, the insert under way, and once the answer ended its update."""

    def __init__(self, token: uuid.UUID, future: asyncio.Future) -> None:
        self.token, self.future = token, future
        self._ending: asyncio.Future | None = None
        self._outcome: tuple[int, str, str] | None = None

    def done(self) -> bool:
        return self.future.done()

    @property
    def journaled(self) -> bool:
        """Whether the row was inserted (when not, the exchange went on without one: its record deletes nothing)."""
        return self.future.done() and not self.future.cancelled() and self.future.exception() is None

    async def noted(self) -> None:
        """Wait until the row is committed (a failed insert is logged: the exchange still goes on)."""
        with contextlib.suppress(Exception):
            await asyncio.shield(self.future)

    async def ended(self, *, status: int, error: str, answer_format: str, answer: Iterable[bytes]) -> None:
        """Make the exchange's whole record durable in its row (the answer's raw bytes and how it ended) and wait
        for the commit: the answer's end goes to the client only after this. A later call with the same outcome
        waits for the first one's write (the answer up to its end is what the record needs); one with another
        outcome (the client hung up while the end waited) writes that outcome, so the row says what the recorder
        will record."""
        outcome = (status, error, answer_format)
        if self._ending is None or outcome != self._outcome:
            self._outcome = outcome
            self._ending = asyncio.ensure_future(_thread.run(
                do_end, token=self.token, status=status, error=error, answer_format=answer_format,
                answer=b"".join(answer)))
            self._ending.add_done_callback(_retrieved)
        with contextlib.suppress(Exception):
            await asyncio.shield(self._ending)


def _request_part(exchange: dict[str, Any]) -> str:
    """The exchange as the recorder will take it, without what the answer adds (JSON text)."""
    return json.dumps({k: v for k, v in exchange.items() if k != "begun"})


def do_begin(*, token: uuid.UUID, exchange: dict[str, Any], process: str) -> None:
    GatewayInFlight.objects.create(token=token, route_id=exchange["route_id"], key_id=exchange["key_id"],
                                   group_key=exchange["group"], endpoint=exchange["endpoint"],
                                   request_kind=exchange["kind"], process=process, begun=timezone.now(),
                                   request=_request_part(exchange))


def do_end(*, token: uuid.UUID, status: int, error: str, answer_format: str, answer: bytes) -> None:
    """The row's exchange ended: its answer and how it ended, so a sweep can write its whole record."""
    try:
        GatewayInFlight.objects.filter(pk=token).update(ended=True, status=status, error=error,
                                                        answer_format=answer_format, answer=answer)
    except Exception:
        logger.exception("gateway: an exchange's end could not be journaled (a crash before its record cuts it)")
        raise


def exchange_of(row: GatewayInFlight) -> recording.Exchange:
    """The whole exchange an ended row holds, as the proxy handed it to the recorder."""
    return recording.Exchange(**json.loads(row.request), status=row.status, error=row.error,
                              answer_format=row.answer_format, answer=(bytes(row.answer),), begun=row.token)


def _begin_on_thread(*, token: uuid.UUID, exchange: dict[str, Any]) -> None:
    global _swept
    if not _swept:  # this process's first exchange: what the process before it left begun is cut first
        _swept = True
        try:
            do_sweep_cut()
        except Exception:
            logger.exception("gateway: the start-up sweep of cut exchanges failed")
    try:
        do_begin(token=token, exchange=exchange, process=PROCESS)
    except Exception:
        logger.exception("gateway: an exchange could not be noted as begun (it goes on; a crash now loses it)")
        raise


def begin(exchange: dict[str, Any]) -> Begun:
    """Note `exchange` as begun (off the event loop, not waited for) and give it its token (`exchange["begun"]`)."""
    token = uuid.uuid4()
    exchange["begun"] = token
    _in_flight.add(token)
    future = asyncio.ensure_future(_thread.run(_begin_on_thread, token=token, exchange=dict(exchange)))
    future.add_done_callback(_retrieved)
    return Begun(token, future)


def _retrieved(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()  # logged on the thread already; retrieved so asyncio does not log it again


def handed_over(token: uuid.UUID | None) -> None:
    """The exchange's record is queued: from now on the recorder, not the exit, finishes it."""
    _in_flight.discard(token)


def _alive_here(process: str) -> bool:
    """Whether the process named `process` (host:pid:start) may still run: False when it ran on this host and its
    pid is gone or is now another process's start; on another host only the age bound can tell."""
    try:
        host, pid, _ = process.rsplit(":", 2)
        pid_number = int(pid)
    except ValueError:
        return True
    if host != HOST or process == PROCESS:
        return True
    if pid_number == os.getpid():
        return False  # this pid, another start: the process before this one
    try:
        os.kill(pid_number, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user (the gateway's, or a new one): only the age bound tells
        return True
    return True


def do_sweep_cut(*, tokens: Iterable[uuid.UUID] | None = None, why: str = "") -> int:
    """Finish the exchanges whose process ended (module docstring), or the given `tokens` (this process stops):
    recorded whole when their answer had ended, else cut GatewayAttempts; how many."""
    now = timezone.now()
    cut = whole = 0
    with transaction.atomic():
        rows = GatewayInFlight.objects.select_for_update(skip_locked=True).order_by("begun")
        if tokens is not None:
            rows = rows.filter(token__in=list(tokens))
        for row in rows:
            old = now - row.begun > dt.timedelta(seconds=cut_after_seconds())
            if tokens is None and not old and _alive_here(row.process):
                continue
            reason = why or ("its process is gone" if not old else f"begun over {cut_after_seconds():g} s ago")
            if row.ended and _recorded_whole(row):
                whole += 1
                continue
            _cut(row, reason)
            cut += 1
    if cut:
        logger.warning("gateway: %d exchange(s) cut by the end of their gateway process recorded as cut", cut)
    if whole:
        logger.warning("gateway: %d exchange(s) whose gateway process ended before their record recorded whole "
                       "from the journal", whole)
    return cut + whole


def _recorded_whole(row: GatewayInFlight) -> bool:
    """Write the record of a row whose answer had ended (the client may have all of it); whether it was written
    (when not, the row is cut: a trace rather than nothing)."""
    try:
        with transaction.atomic():
            recording.do_record_exchange(exchange=exchange_of(row))  # (deletes the row)
        return True
    except Exception:
        logger.exception("gateway: the journaled record of exchange %s could not be written; it is cut", row.token)
        return False


def _cut(row: GatewayInFlight, reason: str) -> None:
    gs = GatewaySession.objects.filter(route_id=row.route_id, key_id=row.key_id, group_key=row.group_key).first()
    GatewayAttempt.objects.create(
        gateway_session=gs, route_id=row.route_id, endpoint=row.endpoint, request_kind=row.request_kind, status=0,
        cut=True, error=f"cut: gateway process {row.process} ended during this exchange ({reason}); begun "
                        f"{row.begun:%Y-%m-%d %H:%M:%S} UTC. Nothing of its answer is recorded (the client may have "
                        "received part of it).")
    if gs is not None:  # a request the session made: the card's count and its cut line are live
        recording.count_answered(gs, detail={"cut": selectors.cut_state(gs=gs)})
    row.delete()


def sweep_on_housekeeping(**signal_kwargs) -> None:
    """The scheduler's housekeeping receiver (every few seconds): one indexed read when nothing is to cut."""
    bound = timezone.now() - dt.timedelta(seconds=cut_after_seconds())
    if GatewayInFlight.objects.filter(begun__lt=bound).exists() or GatewayInFlight.objects.filter(
            process__startswith=f"{HOST}:").exclude(process=PROCESS).exists():
        do_sweep_cut()


def cut_at_exit() -> None:
    """At a clean exit, the exchanges still streaming (Daphne stopped them) are cut records, written by the recorder
    after the records queued before them (registered after the recorder's drain, so atexit runs it first)."""
    tokens = set(_in_flight)
    if tokens:
        recorder.recorder.later(functools.partial(do_sweep_cut, tokens=tokens, why="the process was stopped"))


def close_connections() -> None:
    _thread.close_connections()


atexit.register(cut_at_exit)
