"""A real upstream for the gateway tests that run a Daphne process: an HTTP server on a loopback port, in a thread,
that streams a Responses answer as slowly as the request asks and notes what it saw of the gateway's connection.

The `x-codex-test-stream` request header (the gateway forwards every `x-codex-*` header) picks the answer:
`slow` (an event every `EVENT_SECONDS` for `SLOW_EVENTS` events, then `response.completed`), `die` (three events,
then the connection is dropped mid-chunk), `hold` (the whole answer up to its `response.output_item.done`, then
`response.completed` only once the test sets `release`), `other` (a short whole answer in other words: a retry's
answer that differs from the first), anything else (a short whole answer). A request to `.../v1/messages` is
answered as Anthropic's Messages API streams (`message_start` ... `message_stop`), its mode read from the
`x-sim-test-stream` header (the Messages gateway forwards `x-sim-*` headers, not Codex's)."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field

SLOW_EVENTS = 300
EVENT_SECONDS = 0.1


@dataclass
class Stream:
    mode: str
    body: dict
    messages: bool = False  # an Anthropic Messages request
    events_sent: int = 0
    closed_by_gateway: bool = False  # the gateway closed the connection before the answer ended
    finished: bool = False  # the whole answer was written


@dataclass
class SlowUpstream:
    port: int
    streams: list[Stream] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SlowUpstream:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def wait_for(self, predicate, timeout: float = 60.0) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def _note(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = {}
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
            messages = head.split(b" ", 2)[1].split(b"?")[0].endswith(b"/v1/messages")
            mode = headers.get("x-sim-test-stream" if messages else "x-codex-test-stream", "short")
            stream = Stream(mode=mode, body=body, messages=messages)
            self.streams.append(stream)
            self._note()
            await self._answer(stream, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _answer(self, stream: Stream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                     b"connection: close\r\n\r\n")

        def chunk(data: bytes) -> bytes:
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"

        def event(payload: dict) -> bytes:
            return chunk(f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode())

        response = {"id": "resp_slow", "object": "response", "status": "in_progress", "output": []}
        message = {"id": "msg_slow", "type": "message", "role": "assistant", "model": "slow-model", "content": [],
                   "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 0}}
        if stream.messages:
            writer.write(event({"type": "message_start", "message": message}))
            writer.write(event({"type": "content_block_start", "index": 0,
                                "content_block": {"type": "text", "text": ""}}))
        else:
            writer.write(event({"type": "response.created", "response": response}))
        count = {"slow": SLOW_EVENTS, "die": 3}.get(stream.mode, 2)
        gone = asyncio.ensure_future(reader.read(1))  # b"" once the gateway closes its end
        item = {"type": "message", "role": "assistant", "id": "msg_slow", "content": []}
        if not stream.messages:
            writer.write(event({"type": "response.output_item.added", "output_index": 0, "item": item}))
        text = ""
        for n in range(count):
            delta = f"{'other' if stream.mode == 'other' else 'word'}{n} "
            text += delta
            writer.write(event({"type": "content_block_delta", "index": 0,
                                "delta": {"type": "text_delta", "text": delta}} if stream.messages else
                               {"type": "response.output_text.delta", "item_id": "msg_slow", "output_index": 0,
                                "content_index": 0, "delta": delta}))
            await writer.drain()
            stream.events_sent += 1
            self._note()
            if stream.mode == "slow":
                done, _ = await asyncio.wait({gone}, timeout=EVENT_SECONDS)
                if done:
                    stream.closed_by_gateway = True
                    self._note()
                    return
        if stream.mode == "die":
            writer.write(b"40\r\nevent: response.output_te")  # a chunk cut short, then the connection drops
            await writer.drain()
            writer.transport.abort()
            return
        if stream.messages:
            writer.write(event({"type": "content_block_stop", "index": 0}))
            writer.write(event({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                "usage": {"output_tokens": count}}))
            writer.write(event({"type": "message_stop"}))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            stream.finished = True
            self._note()
            gone.cancel()
            return
        done_item = {**item, "status": "completed", "content": [{"type": "output_text", "text": text,
                                                                  "annotations": []}]}
        writer.write(event({"type": "response.output_item.done", "output_index": 0, "item": done_item}))
        if stream.mode == "hold":
            await writer.drain()
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 120)
        writer.write(event({"type": "response.completed", "response": {
            **response, "status": "completed", "output": [done_item],
            "usage": {"input_tokens": 10, "output_tokens": count, "total_tokens": 10 + count}}}))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        stream.finished = True
        self._note()
        gone.cancel()
