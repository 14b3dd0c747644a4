"""In-memory stand-ins for the turn loop's port and model client.

`FoldPort` keeps a rollout as a list of lines and folds it with the real projection (sessions_app.rollout.projection), so
the meter, the reference-context flag and the window fields follow exactly the rules the database fold follows.
Its `compact` installs a replacement history the way the compaction service does (spec §8.1): a `compacted` line,
and for a mid-turn compaction the full initial context before the last user message plus a `turn_context` line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction_app.engine import meter as m
from compaction_app.engine.items import SUMMARY_PREFIX, is_real_user_message, message_text, user_message
from compaction_app.engine.port import StreamEvent, Usage
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.engine.thresholds import ModelLimits
from compaction_app.engine.tokens import counter
from compaction_app.engine.vocabulary import Reason
from sessions_app.rollout import projection as p
from sessions_app.turns.loop import Marker, TurnCompactionFailed, TurnState, UsageRecord

COUNTER = counter("codex_estimate")
THREAD = "0190f000-0000-7000-8000-000000000001"
INITIAL_CONTEXT = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>\nsandbox\n</permissions instructions>"}]},
    user_message("<environment_context>\n  <cwd>/src</cwd>\n</environment_context>"),
]


@dataclass
class CompactionCall:
    reason: str
    phase: str
    compact_with: ModelLimits | None
    active_tokens: int
    user_texts: list[str]


@dataclass
class FoldPort:
    current: ModelLimits
    scope: str = "total"
    fail_compaction: str | None = None
    # How many tokens of filler a compaction keeps (to make it leave the history big, or small).
    keep_tokens: int = 0
    lines: list[p.Line] = field(default_factory=list)
    compactions: list[CompactionCall] = field(default_factory=list)
    events: list[tuple[str, dict]] = field(default_factory=list)
    initial_context_items: list[dict] = field(default_factory=lambda: list(INITIAL_CONTEXT))
    _projection: p.Projection = field(default_factory=p.Projection)
    _previous: dict | None = None
    _turn_started: bool = False

    def __post_init__(self) -> None:
        self._append(p.SESSION_META, {"id": THREAD, "model": self.current.slug, "base_instructions": {"text": ""},
                                      "window_number": 0, "window_id": "w0", "first_window_id": "w0"})

    # --- helpers for tests ---

    def _append(self, kind: str, payload: dict[str, Any], *, item_tokens: list[int] | None = None) -> None:
        tokens = 0
        if kind == p.RESPONSE_ITEM:
            tokens = COUNTER.count_item(payload)
        if kind in p.HISTORY_INSTALLING_KINDS:
            item_tokens = [COUNTER.count_item(i) for i in payload["replacement_history"]]
            tokens = sum(item_tokens)
        if kind == p.EVENT_MSG and payload.get("source") == "estimate":
            meter = self._projection.header.meter
            payload = {**payload, "info": {"last_token_usage": {"total_tokens": meter.base_tokens + meter.history_tokens}}}
        line = p.Line(seq=self._projection.header.last_seq + 1, kind=kind, payload=payload, tokens=tokens,
                      item_tokens=item_tokens)
        self._projection.apply(line)
        self.lines.append(line)

    def seed(self, items: Sequence[dict], *, context: bool = True, model: ModelLimits | None = None,
             usage_total: int | None = None) -> None:
        """A session that already had a turn: optional initial context + turn_context, items, and a usage."""
        if context:
            for item in self.initial_context_items:
                self._append(p.RESPONSE_ITEM, item)
            limits = model or self.current
            self._append(p.TURN_CONTEXT, {"turn_id": "t0", "model": limits.slug,
                                          "context_window": limits.context_window,
                                          "effective_context_window_percent": limits.effective_percent})
        for item in items:
            self._append(p.RESPONSE_ITEM, item)
        if usage_total is None:
            # As do_create_session does: the meter's base becomes the estimate of the seeded history.
            self._append(p.EVENT_MSG, {"type": "token_count", "source": "estimate", "info": {"last_token_usage": {}}})
        else:
            self._append(p.EVENT_MSG, {"type": "token_count", "info": {"last_token_usage": {"total_tokens": usage_total}}})

    @property
    def items(self) -> list[dict]:
        return self._projection.items

    @property
    def active_tokens(self) -> int:
        return m.active_total(self._projection.header.meter)

    def kinds(self, after_seq: int = 0) -> list[str]:
        """Line kinds (items as their type, event_msgs as their event type) after `after_seq`."""
        out = []
        for line in self.lines:
            if line.seq <= after_seq:
                continue
            if line.kind == p.RESPONSE_ITEM:
                out.append(f"item:{line.payload.get('type')}:{line.payload.get('role', line.payload.get('name', ''))}")
            elif line.kind == p.EVENT_MSG:
                out.append(f"event:{line.payload.get('type')}")
            else:
                out.append(line.kind)
        return out

    @property
    def last_seq(self) -> int:
        return self._projection.header.last_seq

    # --- the port ---

    async def state(self) -> TurnState:
        if not self._turn_started:
            self._turn_started = True
            self._previous = next((ln.payload for ln in reversed(self.lines) if ln.kind == p.TURN_CONTEXT), None)
        from sessions_app.turns.loop import previous_model_from_turn_context

        h = self._projection.header
        return TurnState(
            thread_id=THREAD, window_number=h.window_number, window_id=h.window_id,
            first_window_id=h.first_window_id, previous_window_id=h.previous_window_id,
            active_tokens=m.active_total(h.meter), prefill=h.meter.prefill, scope=self.scope, current=self.current,
            previous=previous_model_from_turn_context(self._previous, configured_limit=self.current.configured_limit),
            reference_context_set=h.reference_context_set, last_seq=h.last_seq,
        )

    def new_turn(self) -> None:
        """Forget the cached previous-turn settings (the Django port reads them once per turn)."""
        self._turn_started = False

    async def history(self) -> list[dict]:
        return list(self._projection.items)

    async def initial_context(self, state: TurnState) -> list[dict]:
        return list(self.initial_context_items)

    async def record(self, records) -> None:
        for record in records:
            if isinstance(record, UsageRecord):
                u = record.usage
                self._append(p.EVENT_MSG, {"type": "token_count", "reasoning_included": record.reasoning_included,
                                           "info": {"last_token_usage": {"input_tokens": u.input_tokens,
                                                                         "output_tokens": u.output_tokens,
                                                                         "total_tokens": u.total_tokens}}})
            elif isinstance(record, Marker):
                self._append(record.kind, dict(record.payload))
            else:
                self._append(p.RESPONSE_ITEM, record)

    async def compact(self, *, reason: Reason, phase: str, compact_with: ModelLimits | None) -> None:
        users = [message_text(i) for i in self.items if is_real_user_message(i)]
        self.compactions.append(CompactionCall(reason.value, phase, compact_with, self.active_tokens, users))
        if self.fail_compaction:
            raise TurnCompactionFailed(self.fail_compaction)
        # The summary carries the summary prefix, as the real one does, so it is not a "real" user message.
        summary = user_message(f"{SUMMARY_PREFIX}\nSUMMARY " + "x " * max(0, self.keep_tokens * 2))
        kept = [user_message(t) for t in users[-1:]]
        if phase == "mid_turn":
            # spec §5.3 BeforeLastUserMessage: the full context goes right before the last real user message.
            history = [*self.initial_context_items, *kept, summary]
        else:
            history = [*kept, summary]
        h = self._projection.header
        self._append(p.COMPACTED, {"message": "", "replacement_history": history,
                                   "window_number": h.window_number + 1, "window_id": f"w{h.window_number + 1}",
                                   "previous_window_id": h.window_id, "first_window_id": h.first_window_id})
        if phase == "mid_turn":
            self._append(p.TURN_CONTEXT, {"turn_id": "compaction", "model": self.current.slug})

    async def heartbeat(self) -> None:
        return None

    async def publish(self, kind: str, detail: dict) -> None:
        self.events.append((kind, detail))


def assistant(text: str, item_id: str = "msg_1") -> dict:
    return {"type": "message", "role": "assistant", "id": item_id, "content": [{"type": "output_text", "text": text}]}


def call(name: str, call_id: str, arguments: str = "{}") -> dict:
    return {"type": "function_call", "name": name, "call_id": call_id, "arguments": arguments}


@dataclass
class Reply:
    items: list[dict]
    total_tokens: int = 100
    error: ProviderError | None = None


class ScriptedClient:
    """A ModelClient that answers each request with the next Reply and records the requests."""

    model = "fake"

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests = []

    async def stream_response(self, request):
        self.requests.append(request)
        if not self.replies:
            raise AssertionError("the turn made a request the test did not plan")
        reply = self.replies.pop(0)
        if reply.error is not None:
            raise reply.error
        yield StreamEvent(type="response.created", response_id="resp")
        for item in reply.items:
            yield StreamEvent(type="response.output_item.done", item=item)
        yield StreamEvent(type="response.completed", usage=Usage(input_tokens=reply.total_tokens - 10,
                                                                  output_tokens=10, total_tokens=reply.total_tokens))

    async def compact(self, request):  # pragma: no cover - the turn loop never compacts itself
        raise AssertionError("compact is the compaction service's job")


def overloaded() -> ProviderError:
    return ProviderError(kind=ErrorKind.SERVER_OVERLOADED, message="overloaded", http_status=503)


def bad_request() -> ProviderError:
    return ProviderError(kind=ErrorKind.INVALID_REQUEST, message="bad request", http_status=400)
