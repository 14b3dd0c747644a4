"""The gateway's recorder thread (issue 29): every exchange is written here, off the stream's path.

The proxy hands over an exchange as it ended (the answer's raw bytes, unparsed) with one `SimpleQueue.put`: no
future, no parse, no database on the event loop, so a slow database delays the record, never the client. The
thread takes every exchange waiting and writes them in one transaction, a savepoint each (one commit per batch
rather than per exchange; a record that fails rolls back alone), in the order the exchanges ended, so a Codex
session's exchanges land in order. It keeps its database connection between batches (compactweb.db_threads:
opening one per exchange cost more than the write) and drops it after an error, so the next batch reconnects.

Jobs that must run after the records before them (compactweb mode brings the history up to the compaction
request's before compacting) go through the same queue (`run`).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from django.db import connection, connections, transaction

from compactweb.db_threads import fresh_connections, keep_connections_here
from compactweb.metrics import recorder_wait
from gateway_app import recording

logger = logging.getLogger(__name__)

BATCH = 64  # at most this many exchanges per transaction: a batch holds SQLite's write lock while it runs
MAX_WAITING = 10_000  # records (and jobs) queued at most; past it a request waits for room
DRAIN_SECONDS = 30.0  # at exit, how long the queued records get to be written


class _Job:
    """A callable run alone on the recorder thread; its result (or error) goes back to the awaiting loop."""

    def __init__(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop | None,
                 future: asyncio.Future | None) -> None:
        self.fn, self.loop, self.future = fn, loop, future

    def run(self) -> None:
        try:
            result, error = self.fn(), None
        except BaseException as exc:  # handed back to the caller
            result, error = None, exc
        if self.future is not None:
            self.loop.call_soon_threadsafe(_settle, self.future, result, error)
        elif error is not None:
            logger.error("gateway: a recorder job failed", exc_info=error)


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class Recorder:
    """The queue is bounded (`limit`): when the database falls behind, a request whose record does not fit waits
    for room (`put`) rather than memory growing without end; the thread is started again if it ever died; and at
    the process's exit what is queued is written (`drain`, registered with atexit) before the process ends."""

    def __init__(self, limit: int = MAX_WAITING) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=limit)
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def _ensure_thread(self) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive():
            with self._start:
                if self._thread is thread:
                    if thread is not None:
                        logger.error("gateway: the recorder thread had died; started again")
                    self._thread = threading.Thread(target=self._loop, name="compactweb-gateway-record", daemon=True)
                    self._thread.start()

    def submit(self, exchange: recording.Exchange) -> None:
        """Record `exchange` later (thread-safe); waits for room when the queue is full (not on an event loop:
        `put` there)."""
        self._ensure_thread()
        recorder_wait.submitted()
        self._queue.put(exchange)

    async def put(self, exchange: recording.Exchange) -> None:
        """Record `exchange` later: one queue put, or, when the queue is full, the request waits for room (off
        the event loop) so that the database's pace, not memory, bounds what is waiting."""
        self._ensure_thread()
        recorder_wait.submitted()
        try:
            self._queue.put_nowait(exchange)
        except queue.Full:
            logger.warning("gateway: the recorder's queue is full (%d): a request waits for room", self._queue.maxsize)
            await asyncio.get_running_loop().run_in_executor(None, self._queue.put, exchange)

    def later(self, fn: Callable[[], Any]) -> None:
        """Run `fn` on the recorder thread after the records before it; nobody waits for it (an error is logged;
        with the queue full it is dropped: only what can wait goes here)."""
        self._ensure_thread()
        try:
            self._queue.put_nowait(_Job(fn, None, None))
        except queue.Full:
            logger.warning("gateway: the recorder's queue is full: a deferred job was dropped")

    async def run(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the recorder thread after every record submitted before it; its result."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._ensure_thread()
        job = _Job(fn, loop, future)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            await loop.run_in_executor(None, self._queue.put, job)
        return await future

    def run_sync(self, fn: Callable[[], Any], timeout: float | None = None) -> bool:
        """Run `fn` on the recorder thread and wait for it (from a thread that is not the recorder's), at most
        `timeout` seconds; whether it ran."""
        done = threading.Event()
        self._ensure_thread()
        self._queue.put(_Job(lambda: (fn(), done.set()), None, None), timeout=timeout)
        return done.wait(timeout)

    def drain(self, timeout: float = DRAIN_SECONDS) -> bool:
        """Write every record queued so far (a clean shutdown: atexit); whether it finished within `timeout`."""
        if self._thread is None or self._queue.empty():
            return True
        finished = self.run_sync(lambda: None, timeout=timeout)
        if not finished:
            logger.error("gateway: %d records were still queued at exit", self._queue.qsize())
        return finished

    def _loop(self) -> None:
        keep_connections_here()
        while True:
            batch = [self._queue.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._run_batch(batch)
            except Exception:  # never let the thread die of one batch (each record already rolls back alone)
                logger.exception("gateway: the recorder failed on a batch of %d", len(batch))

    def _run_batch(self, batch: list) -> None:
        exchanges: list[recording.Exchange] = []
        for entry in batch:
            if isinstance(entry, _Job):
                self._write(exchanges)
                exchanges = []
                entry.run()
            else:
                exchanges.append(entry)
        self._write(exchanges)

    def _write(self, exchanges: list[recording.Exchange]) -> None:
        if not exchanges:
            return
        fresh_connections()  # closed by the server while idle, or old: reconnect rather than lose the batch
        try:
            with transaction.atomic():
                for exchange in exchanges:
                    try:
                        with transaction.atomic():
                            recording.do_record_exchange(exchange=exchange)
                    except Exception:  # this record rolls back alone; the others are written
                        logger.exception("gateway: recording an exchange of route %s failed", exchange.route_id)
        except Exception:  # the connection broke (a database restart): drop it, the next batch reconnects
            logger.exception("gateway: a batch of %d records could not be written", len(exchanges))
            connection.close()
        recorder_wait.written(len(exchanges))


recorder = Recorder()
atexit.register(recorder.drain)


def close_connections() -> None:
    """Close the recorder's database connections (a test database is dropped after the tests)."""
    recorder.run_sync(connections.close_all)
