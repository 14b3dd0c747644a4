"""The embedded simulated model provider: a plain ASGI app speaking the OpenAI Responses API (issue 3).

Routes (relative to the mount point; the dashboard serves it under /sim, the in-process transport at the root):
    POST /v1/responses            streamed (SSE) turns, summaries and remote v2 compaction (`compaction_trigger`)
    POST /v1/responses/compact    remote v1 compaction (JSON)
    POST /v1/chat/completions     the same model over chat completions (streamed or not)
    POST /anthropic/v1/messages   the same model over Anthropic's Messages API (streamed or not; `anthropic`)
    POST /anthropic/v1/messages/count_tokens
    GET  /v1/models               the model list

Usage is the exact o200k_base token count of what was received (instructions + input items); an input over the
context window fails with HTTP 400 `context_length_exceeded`, like a real server. Fault injection headers are
described in `faults`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compaction_app.engine.history_snapshot import HistorySnapshot
from compaction_app.engine.items import is_compaction_item
from compaction_app.engine.lru import Lru
from compaction_app.engine.thresholds import DEFAULT_CONTEXT_WINDOW
from compaction_app.engine.tokens import TokenCounter, counter, item_json
from compaction_app.engine.unicode_text import LONE_SURROGATE, has_lone_surrogate
from compaction_app.providers.chat_format import messages_to_items
from compaction_app.providers.in_process import request_body
from compaction_app.providers.simulated import anthropic, codec, compaction, faults, probes, replies
from compaction_app.providers.simulated.faults import Fault, FaultCounter, FaultSyntaxError
from compaction_app.providers.simulated.recording import RequestRecorder
from compaction_app.providers.simulated.summarizer import is_summarization_request
from compaction_app.providers.simulated.tool_arguments import references_in

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "compactweb-sim"
ANTHROPIC_MESSAGES = "/anthropic/v1/messages"
ANTHROPIC_COUNT_TOKENS = "/anthropic/v1/messages/count_tokens"
ENCODING = "o200k_base"
# OpenAI caches prompt prefixes of at least 1024 tokens, in steps of 128.
CACHE_MIN_TOKENS, CACHE_STEP = 1024, 128
CACHE_KEYS = 1024
# Bodies larger than this are refused with 413 before any is parsed or tokenized (issue 14: 10 MB cost 14 s).
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HTTPError(Exception):
    def __init__(self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None,
                 error_type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}
        self.error_type = error_type

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.error_type, "param": None, "code": self.code}}


class _Columns:
    """Per-item columns shared along a chain of requests that each extend the previous one's input. Entries are
    only ever appended, by the newest request of the chain (`owner`), so every request's view (its first `n`
    entries) stays valid however the chain grows; a request that extends an older one copies its view instead."""

    __slots__ = ("compactions", "keys", "owner", "totals", "triggers")

    def __init__(self, keys: list[str], totals: list[int], triggers: list[int], compactions: list[int]) -> None:
        self.keys, self.totals, self.triggers, self.compactions = keys, totals, triggers, compactions
        self.owner: object | None = None


@dataclass
class Counted:
    """A request's input as the simulator counted it: each item once, by content, with running totals."""

    instructions: tuple[str, int]  # (the text, its tokens)
    raw: Sequence[Any]  # the input as received (a list, or a turn's HistorySnapshot)
    items: list[dict[str, Any]]  # the same, normalised (the same list when nothing needed normalising)
    columns: _Columns  # keys (each item's serialisation), running totals, trigger and compaction positions
    n: int  # how many items of the columns are this request's
    input_tokens: int
    triggers: list[int]  # positions of compaction_trigger items
    compactions: list[int]  # positions of compaction items (what a reply remembers)
    references: dict[str, Any]  # tool_arguments.references_in of the input, kept up to date item by item

    @property
    def last_key(self) -> str:
        return self.columns.keys[self.n - 1] if self.n else ""

    def key_at(self, index: int) -> str:
        return self.columns.keys[index]

    def tokens_before(self, index: int) -> int:
        return self.columns.totals[index]


class InputMemo:
    """What the simulator remembers per prompt cache key: the previous request's counted input.

    A session's next request repeats its previous input and adds a few items, so only the new items are normalised,
    serialised (once) and counted; the repeated prefix is recognised in O(1) for a turn's `HistorySnapshot`, else by
    one list comparison (identity first, then equality: both C loops). Items are counted by the process's shared
    counter, which remembers long texts by content, so what the dashboard already counted, or a history that comes
    back (after a rollback, in another session), is not tokenized again. `cached_tokens` reports the shared prefix
    like OpenAI's prompt caching (at least 1024 tokens, in steps of 128).
    """

    def __init__(self, counter: TokenCounter, *, keys: int = CACHE_KEYS) -> None:
        self._counter = counter
        self._entries: Lru[str, Counted] = Lru(keys)

    def previous(self, key: str) -> Counted | None:
        return self._entries.peek(key)

    def count(self, key: str, instructions: str, raw: Sequence[Any]) -> tuple[Counted, int]:
        """(the counted input, the tokens of the prefix it shares with the previous request of `key`). Raises
        HTTPError 400 when an item is not an object. `remember` it once the request succeeds."""
        previous = self._entries.peek(key)
        if previous is not None and previous.instructions[0] == instructions:
            instr = previous.instructions
        else:
            instr = (instructions, self._counter.count_text(instructions))
        shared_items = 0
        if previous is not None and _repeats(previous.raw, raw):
            shared_items = previous.n
        counted = self._count(previous if shared_items else None, instr, raw, shared_items)
        shared = 0 if previous is None else _shared_tokens(previous, counted, shared_items)
        return counted, shared

    def remember(self, key: str, counted: Counted) -> None:
        self._entries.put(key, counted)

    def _counted_item(self, item: dict[str, Any]) -> tuple[str, int]:
        key = item_json(item)  # the one serialisation: the item's key, and the text counted for a plain item
        # The shared counter remembers long texts by content: an item the dashboard already counted (a tool
        # output it appended, this model's own earlier output) or a history that comes back after a rollback
        # is not tokenized again.
        return key, self._counter.count_item_json(item, key)

    def _count(self, previous: Counted | None, instr: tuple[str, int], raw: Sequence[Any], shared: int) -> Counted:
        """Count `raw`; with `previous`, its first `shared` items are the previous request's, already counted."""
        suffix = _normalized(raw, shared)
        if previous is None:
            columns = _Columns([], [0], [], [])
            items = raw if all(a is b for a, b in zip(suffix, raw, strict=True)) else suffix
        else:
            if previous.items is previous.raw and all(a is b for a, b in zip(suffix, raw[shared:], strict=True)):
                items = raw
            else:
                items = [*previous.items[:shared], *suffix]
            columns = previous.columns
            if columns.owner is not previous or len(columns.keys) != shared:
                # Someone else extended this chain already: start a new one from our view of it.
                columns = _Columns(columns.keys[:shared], columns.totals[:shared + 1],
                                   [t for t in columns.triggers if t < shared],
                                   [c for c in columns.compactions if c < shared])
        keys, totals, triggers, compactions = columns.keys, columns.totals, columns.triggers, columns.compactions
        running = totals[-1]
        for offset, item in enumerate(suffix):
            key, tokens = self._counted_item(item)
            keys.append(key)
            running += tokens
            totals.append(running)
            if item.get("type") == compaction.TRIGGER:
                triggers.append(shared + offset)
            elif is_compaction_item(item):
                compactions.append(shared + offset)
        references = {**(previous.references if previous is not None else {}), **references_in(suffix)}
        counted = Counted(instr, raw, items, columns, len(keys), instr[1] + running, list(triggers),
                          list(compactions), references)
        columns.owner = counted
        return counted


def _repeats(previous: Sequence[Any], raw: Sequence[Any]) -> bool:
    """Whether `raw` starts with the whole of `previous`: a session's next request repeats its input. A turn's
    input is a snapshot of its growing history, which tells in O(1); any other input takes one C-level comparison
    (identity first, then equality)."""
    n = len(previous)
    if len(raw) < n:
        return False
    if isinstance(raw, HistorySnapshot) and raw.extends(previous):
        return True
    return raw == previous if len(raw) == n else previous == raw[:n]


def _cache_key(body: dict[str, Any], instructions: str) -> str:
    return str(body.get("prompt_cache_key") or f"{body.get('model')}:{instructions}")


def _shared_tokens(previous: Counted, counted: Counted, shared_items: int) -> int:
    """Tokens of the prefix the two requests share (instructions first, then items), like the prompt cache sees it."""
    if previous.instructions[0] != counted.instructions[0]:
        return 0
    shared = shared_items
    if not shared_items:  # not an extension: compare item by item (after a compaction or a rollback)
        for index in range(min(previous.n, counted.n)):
            if previous.key_at(index) != counted.key_at(index):
                break
            shared += 1
    tokens = counted.instructions[1] + counted.tokens_before(shared)
    return 0 if tokens < CACHE_MIN_TOKENS else tokens - tokens % CACHE_STEP


def _normalized(raw: Sequence[Any], start: int) -> list[dict[str, Any]]:
    tail = raw[start:]
    if not all(isinstance(i, dict) for i in tail):
        raise HTTPError(400, "invalid_request_error", "`input` must be a string or an array of item objects")
    return [_normalize_item(i) for i in tail]


class SimulatedProvider:
    """One simulator instance; fault counters and the prompt cache live here."""

    def __init__(self, *, root_path: str = "", context_window: int | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, model: str = DEFAULT_MODEL,
                 recorder: RequestRecorder | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.root_path = root_path.rstrip("/")
        self.recorder = recorder
        self.max_body_bytes = max_body_bytes
        self.context_window = context_window
        self.sleep = sleep
        self.model = model
        self.fault_counter = FaultCounter()
        self._tokens = counter(ENCODING)
        self.memo = InputMemo(self._tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await refuse_websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        if self.root_path and (path == self.root_path or path.startswith(self.root_path + "/")):
            path = path[len(self.root_path) :] or "/"
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        method = scope.get("method", "GET")
        try:
            if path == "/v1/models":
                _require(method, "GET")
                await _send_json(send, 200, {"object": "list", "data": [
                    {"id": self.model, "object": "model", "created": 0, "owned_by": "compactweb-sim"}]})
                return
            handler = {
                "/v1/responses": self._responses,
                "/v1/responses/compact": self._compact,
                "/v1/chat/completions": self._chat,
                ANTHROPIC_MESSAGES: self._messages,
                ANTHROPIC_COUNT_TOKENS: self._count_tokens,
            }.get(path)
            if handler is None:
                raise HTTPError(404, "not_found", f"no route for {method} {path}")
            _require(method, "POST")
            # In process (the embedded transport), the body arrives as the client's object: read-only here.
            body = request_body()
            if body is None:
                body = await _read_json(receive, headers, limit=self.max_body_bytes)
            if self.recorder is not None:
                self.recorder.record(endpoint=path, body=body, headers=headers)
            try:
                await handler(body, headers, send)
            except codec.PayloadTooLarge as exc:  # a decompression bomb in an item's encrypted_content
                raise HTTPError(400, "invalid_request_error", str(exc)) from None
        except HTTPError as error:
            await _send_json(send, error.status, error.body(), error.headers)

    # -- helpers -------------------------------------------------------------------------------------------------

    def _window(self, headers: dict[str, str]) -> int:
        raw = headers.get(faults.CONTEXT_WINDOW_HEADER)
        if raw:
            if not faults.is_whole_number(raw) or not 0 < int(raw) <= faults.MAX_CONTEXT_WINDOW:
                raise HTTPError(400, "invalid_header", f"{faults.CONTEXT_WINDOW_HEADER} must be a positive integer "
                                f"up to {faults.MAX_CONTEXT_WINDOW}")
            return int(raw)
        return self.context_window or DEFAULT_CONTEXT_WINDOW

    def _count_input(self, body: dict[str, Any], instructions: str, raw: Sequence[Any]) -> tuple[Counted, int]:
        """The input counted (each new item once) and the tokens it shares with the previous request of its
        prompt cache key."""
        return self.memo.count(_cache_key(body, instructions), instructions, raw)

    def _usage(self, body: dict[str, Any], counted: Counted, shared: int, output_tokens: int) -> dict[str, Any]:
        """The response's usage; the request is now the one its prompt cache key remembers."""
        self.memo.remember(_cache_key(body, counted.instructions[0]), counted)
        input_tokens = counted.input_tokens
        return {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": shared},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        }

    async def _apply_faults(self, headers: dict[str, str], endpoint: str) -> dict[str, Fault]:
        try:
            parsed = faults.parse_faults(headers.get(faults.FAULT_HEADER))
        except FaultSyntaxError as exc:
            raise HTTPError(400, "invalid_fault_header", str(exc)) from None
        firing = self.fault_counter.active(parsed, endpoint)
        if "slow" in firing:
            await self.sleep(firing["slow"].seconds)
        if "context_window_exceeded" in firing:
            raise _context_exceeded("fault injected: context_window_exceeded")
        if "overloaded" in firing:
            raise _overloaded(firing["overloaded"])
        if "server_error" in firing:
            raise HTTPError(500, "server_error", "fault injected: internal server error", error_type="server_error")
        return firing

    def _check_window(self, counted: Counted, headers: dict[str, str]) -> None:
        total, window = counted.input_tokens, self._window(headers)
        if total > window:
            raise _context_exceeded(
                f"Your input exceeds the context window of this model: {total} tokens requested, window {window}."
            )

    def _response_headers(self, headers: dict[str, str]) -> dict[str, str]:
        if headers.get(faults.REASONING_INCLUDED_HEADER, "").lower() == "true":
            return {"X-Reasoning-Included": "true"}
        return {}

    # -- endpoints -----------------------------------------------------------------------------------------------

    async def _responses(self, body: dict[str, Any], headers: dict[str, str], send: Send) -> None:
        raw = _raw_items(body, "input")
        instructions = _instructions(body)
        counted, shared = self._count_input(body, instructions, raw)
        items = counted.items
        if counted.triggers and counted.triggers != [len(items) - 1]:
            raise HTTPError(400, "invalid_request_error", "compaction_trigger must appear once, as the final input item")
        v2 = compaction.is_v2_request(items)
        firing = await self._apply_faults(headers, "responses_v2" if v2 else "responses")
        body = {**body, "input": items}
        self._check_window(counted, headers)

        if v2:
            history = items[:-1]
            item, summary = compaction.compaction_item(history)
            output = [replies.assistant_message("Compacting the conversation.", replies.short_id("msg", item["id"]))]
            if "v2_zero" not in firing:
                output.append(item)
            if "v2_two" in firing:
                second, _ = compaction.compaction_item([*history, {"type": "message", "role": "user", "content": []}])
                output.append({**second, "id": replies.short_id("cmp", "second", item["id"])})
            output_tokens = self._tokens.count_text(summary)
        else:
            probe = probes.probe_of(body)
            if probe is not None:
                output = probes.probe_reply(body, probe)
            elif is_summarization_request(body):
                output = replies.summary_reply(body)
            else:
                output = replies.turn_reply(body, compaction_positions=counted.compactions,
                                            references=counted.references)
            output_tokens = sum(self._tokens.count_item(i) for i in output)
        usage = self._usage(body, counted, shared, output_tokens)
        response_id = replies.short_id("resp", *_request_identity(body, counted), str(time.time_ns()))
        await self._stream_response(send, body, response_id, output, usage, firing, headers)

    async def _stream_response(self, send: Send, body: dict[str, Any], response_id: str,
                               output: list[dict[str, Any]], usage: dict[str, Any], firing: dict[str, Fault],
                               headers: dict[str, str]) -> None:
        model = str(body.get("model") or self.model)
        created_at = int(time.time())
        seq = 0

        def event(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            payload = {"type": kind, "sequence_number": seq, **fields}
            seq += 1
            return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

        def response_obj(status: str, out: list[dict[str, Any]], usage_obj: dict[str, Any] | None) -> dict:
            return {"id": response_id, "object": "response", "created_at": created_at, "status": status,
                    "model": model, "output": out, "usage": usage_obj, "parallel_tool_calls": False,
                    "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
                    "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0}

        if body.get("stream") is False:  # asked for one JSON response, as the Responses API answers it
            await _send_json(send, 200, response_obj("completed", output, usage), self._response_headers(headers))
            return
        await _start(send, 200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                 **self._response_headers(headers)})
        chunks = [event("response.created", response=response_obj("in_progress", [], None))]
        if "bad_json" in firing:
            chunks.append(b"data: {this is not json\n\n")
        for index, item in enumerate(output):
            chunks.append(event("response.output_item.added", output_index=index, item=_in_progress(item)))
            if item.get("type") == "message":
                text = "".join(p.get("text", "") for p in item.get("content", []))
                for piece in _pieces(text):
                    chunks.append(event("response.output_text.delta", item_id=item.get("id", ""), output_index=index,
                                        content_index=0, delta=piece, logprobs=[]))
            chunks.append(event("response.output_item.done", output_index=index, item=item))
        if "stream_closed" not in firing:
            chunks.append(event("response.completed", response=response_obj("completed", output, usage)))
        if headers.get(faults.STREAM_HEADER, "").strip().lower() == faults.STREAM_EVENTS:
            for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        # The whole answer is made before the first event goes out, so it goes out as one write, as a server
        # sends what it has ready at once: one send instead of one per event (~300 for a turn's reply) saves the
        # server and every client and proxy reading it a per-chunk cost for nothing.
        await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": False})

    async def _compact(self, body: dict[str, Any], headers: dict[str, str], send: Send) -> None:
        raw = _raw_items(body, "input")
        instructions = _instructions(body)
        firing = await self._apply_faults(headers, "compact")
        counted, shared = self._count_input(body, instructions, raw)
        items = counted.items
        self._check_window(counted, headers)
        if "compact_malformed" in firing:
            await _send_json(send, 200, {"output": "not a list"})
            return
        if "bad_json" in firing:
            await _start(send, 200, {"Content-Type": "application/json"})
            await send({"type": "http.response.body", "body": b"{this is not json", "more_body": False})
            return
        output, summary = compaction.compact_output(items)
        usage = self._usage(body, counted, shared, self._tokens.count_text(summary))
        await _send_json(send, 200, {
            "id": replies.short_id("resp", *_request_identity(body, counted)),
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": output,
            "usage": usage,
        })

    async def _chat(self, body: dict[str, Any], headers: dict[str, str], send: Send) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise HTTPError(400, "invalid_request_error", "`messages` must be an array of objects")
        instructions, items = messages_to_items(messages)
        firing = await self._apply_faults(headers, "chat")
        as_key = {"model": body.get("model"), "prompt_cache_key": body.get("prompt_cache_key")}
        counted, shared = self._count_input(as_key, instructions, items)
        items = counted.items
        self._check_window(counted, headers)
        as_responses = {"model": body.get("model"), "instructions": instructions, "input": items,
                        "tools": body.get("tools") or []}
        if is_summarization_request(as_responses):
            output = replies.summary_reply(as_responses)
        else:
            output = [i for i in replies.turn_reply(as_responses) if i.get("type") != "reasoning"]
        text = "".join(p.get("text", "") for i in output if i.get("type") == "message" for p in i["content"])
        calls = [i for i in output if i.get("type") == "function_call"]
        usage = self._usage(body, counted, shared, sum(self._tokens.count_item(i) for i in output))
        chat_usage = {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"],
                      "total_tokens": usage["total_tokens"],
                      "prompt_tokens_details": {"cached_tokens": usage["input_tokens_details"]["cached_tokens"]}}
        chat_id = replies.short_id("chatcmpl", *_request_identity(as_responses, counted), str(time.time_ns()))
        model = str(body.get("model") or self.model)
        finish = "tool_calls" if calls else "stop"
        tool_calls = [{"index": n, "id": c["call_id"], "type": "function",
                       "function": {"name": c["name"], "arguments": c["arguments"]}} for n, c in enumerate(calls)]
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool_calls:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in tool_calls]
            await _send_json(send, 200, {"id": chat_id, "object": "chat.completion", "created": int(time.time()),
                                         "model": model, "choices": [{"index": 0, "message": message,
                                                                      "finish_reason": finish}],
                                         "usage": chat_usage})
            return

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            payload = {"id": chat_id, "object": "chat.completion.chunk", "created": int(time.time()),
                       "model": model, "choices": choices, **extra}
            return f"data: {json.dumps(payload)}\n\n".encode()

        parts = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
        if "bad_json" in firing:
            parts.append(b"data: {this is not json\n\n")
        for piece in _pieces(text):
            parts.append(chunk([{"index": 0, "delta": {"content": piece}, "finish_reason": None}]))
        for call in tool_calls:
            parts.append(chunk([{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]))
        if "stream_closed" not in firing:
            parts.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
            if (body.get("stream_options") or {}).get("include_usage"):
                parts.append(chunk([], usage=chat_usage))
            parts.append(b"data: [DONE]\n\n")
        await _start(send, 200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        for part in parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


    # -- Anthropic Messages API (issue 35) -------------------------------------------------------------------------

    def _read_messages(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
        try:
            system, items, tools = anthropic.read_request(body)
        except anthropic.MessagesFormatError as exc:
            raise HTTPError(400, "invalid_request_error", str(exc)) from None
        # The tool definitions are part of the prompt Anthropic counts: they are counted with the system text.
        return system + ("\n" + json.dumps(body["tools"]) if body.get("tools") else ""), items, tools

    async def _count_tokens(self, body: dict[str, Any], headers: dict[str, str], send: Send) -> None:
        instructions, items, _tools = self._read_messages(body)
        counted, _ = self._count_input({"model": body.get("model")}, instructions, items)
        await _send_json(send, 200, {"input_tokens": counted.input_tokens})

    async def _messages(self, body: dict[str, Any], headers: dict[str, str], send: Send) -> None:
        instructions, items, tools = self._read_messages(body)
        firing = await self._apply_faults(headers, "messages")
        counted, shared = self._count_input({"model": body.get("model")}, instructions, items)
        items = counted.items
        self._check_window(counted, headers)
        request = {"model": body.get("model"), "instructions": instructions, "input": items, "tools": tools}
        # Claude Code's summary prompt, or a summarisation compactweb itself asks for (a policy's local compaction
        # on an Anthropic Provider: its prompt, no tools), as on /responses.
        if anthropic.is_summary_request(items) or (not tools and is_summarization_request({"input": items})):
            output = replies.summary_reply(request)
        else:
            output = replies.turn_reply(request, compaction_positions=counted.compactions,
                                        references=counted.references)
        blocks = anthropic.content_blocks(output)
        output_tokens = sum(self._tokens.count_item(i) for i in output)
        usage = self._usage(request, counted, shared, output_tokens)
        message_id = replies.short_id("msg", *_request_identity(request, counted), str(time.time_ns()))
        answer = anthropic.message(message_id, str(body.get("model") or self.model), blocks,
                                   anthropic.usage(usage["input_tokens"], output_tokens, shared))
        if not body.get("stream"):
            await _send_json(send, 200, answer)
            return
        await _start(send, 200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        events = anthropic.stream_events(answer, _pieces)
        if "stream_closed" in firing:
            events = events[:-2]
        for event in events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def create_app(*, root_path: str = "", context_window: int | None = None,
               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
               model: str = DEFAULT_MODEL, recorder: RequestRecorder | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> SimulatedProvider:
    """A new simulated provider (ASGI). `sleep` serves the `slow` fault, so tests can inject a recorder;
    `recorder` writes down every request received (see `recording`); bodies over `max_body_bytes` answer 413."""
    return SimulatedProvider(root_path=root_path, context_window=context_window, sleep=sleep, model=model,
                             recorder=recorder, max_body_bytes=max_body_bytes)


# -- HTTP plumbing ---------------------------------------------------------------------------------------------------


def _context_exceeded(message: str) -> HTTPError:
    return HTTPError(400, "context_length_exceeded", message)


def _overloaded(fault: Fault) -> HTTPError:
    retry_after = fault.params.get("retry_after")
    if fault.params.get("status") == "503":
        headers = {"Retry-After": retry_after} if retry_after and retry_after != "none" else {}
        return HTTPError(503, "server_is_overloaded", "fault injected: the server is overloaded, try again later",
                         headers=headers, error_type="server_error")
    retry_after = retry_after or "1"
    headers = {} if retry_after == "none" else {"Retry-After": retry_after}
    return HTTPError(429, "rate_limit_exceeded", "fault injected: rate limit reached, please retry later",
                     headers=headers, error_type="requests")


def _require(method: str, expected: str) -> None:
    if method != expected:
        raise HTTPError(405, "method_not_allowed", f"use {expected}", headers={"Allow": expected})


def _raw_items(body: dict[str, Any], key: str) -> list[Any]:
    """The input list as sent (a string is one user message); its items are checked and normalised as they are
    counted (`InputMemo`), so a repeated prefix is not walked again."""
    value = body.get(key)
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    if not isinstance(value, list | HistorySnapshot):
        raise HTTPError(400, "invalid_request_error", f"`{key}` must be a string or an array of item objects")
    return value


def _request_identity(body: dict[str, Any], counted: Counted) -> tuple[str, ...]:
    """What names a request in its response id: the model, the input's length and its newest item (not a digest of
    the whole body, which would cost a serialisation of the history per request)."""
    return str(body.get("model") or ""), counted.instructions[0][:200], str(counted.n), counted.last_key[-400:]


def _normalize_item(item: dict[str, Any]) -> dict[str, Any]:
    """Accept the API's "easy input" form: `{"role": ..., "content": "text"}` without `type` is a message."""
    if "type" not in item and "role" in item:
        item = {"type": "message", **item}
    if item.get("type") == "message" and isinstance(item.get("content"), str):
        part = "output_text" if item.get("role") == "assistant" else "input_text"
        item = {**item, "content": [{"type": part, "text": item["content"]}]}
    return item


def _instructions(body: dict[str, Any]) -> str:
    value = body.get("instructions") or ""
    if not isinstance(value, str):
        raise HTTPError(400, "invalid_request_error", "`instructions` must be a string")
    return value


def _in_progress(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "message":
        return {**item, "status": "in_progress", "content": []}
    return item


def _pieces(text: str, size: int = 24) -> list[str]:
    """Split text into delta-sized pieces (on word boundaries where possible)."""
    pieces, current = [], ""
    for word in text.split(" "):
        candidate = word if not current else current + " " + word
        if len(candidate) > size and current:
            pieces.append(current + " ")
            current = word
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


def _too_large(limit: int) -> HTTPError:
    return HTTPError(413, "request_too_large", f"the request body is larger than {limit} bytes")


async def _read_json(receive: Receive, headers: dict[str, str], *, limit: int) -> dict[str, Any]:
    declared = headers.get("content-length", "")
    if faults.is_whole_number(declared) and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HTTPError(400, "invalid_request_error", "client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    raw = b"".join(chunks)
    try:
        body = json.loads(raw or b"null")
    except (ValueError, RecursionError):  # a UnicodeDecodeError too: bytes that are not UTF-8
        raise HTTPError(400, "invalid_request_error", "request body is not valid JSON in UTF-8") from None
    if not isinstance(body, dict):
        raise HTTPError(400, "invalid_request_error", "request body must be a JSON object")
    if has_lone_surrogate(raw, body):
        raise HTTPError(400, "invalid_request_error", f"request body: {LONE_SURROGATE}")
    return body


async def _start(send: Send, status: int, headers: dict[str, str]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]})


async def _send_json(send: Send, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(payload).encode("utf-8")
    await _start(send, status, {"Content-Type": "application/json", "Content-Length": str(len(data)),
                                **(headers or {})})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def refuse_websocket(scope: Scope, receive: Receive, send: Send, *,
                           text: str = "the simulated model serves the Responses API over HTTP only") -> None:
    """The simulated model speaks HTTP only (and so does the gateway, which answers with this too). Codex tries a
    Responses websocket first and falls back to HTTP when the handshake is refused: answer the handshake with HTTP
    426 (the ASGI websocket denial response where the server supports it, else a plain close, which servers send
    as 403), so the fallback is immediate."""
    message = await receive()
    if message.get("type") != "websocket.connect":
        return
    body = json.dumps({"error": {"message": text,
                                 "type": "invalid_request_error", "param": None,
                                 "code": "websocket_not_supported"}}).encode("utf-8")
    if "websocket.http.response" in (scope.get("extensions") or {}):
        await send({"type": "websocket.http.response.start", "status": 426,
                    "headers": [(b"content-type", b"application/json"), (b"upgrade", b"HTTP/1.1")]})
        await send({"type": "websocket.http.response.body", "body": body, "more_body": False})
    else:
        await send({"type": "websocket.close", "code": 1008})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
