"""The turn loop: one regular turn of an agent session, as Codex's `run_turn` does it (spec §2.4, §3.2, §5.3, §6.2).

The same loop runs `POST /sessions/<id>/turns` and every simulated step. It is plain Python: everything it reads or
writes goes through a small `TurnPort` (the Django adapter in `sessions_app.turns.services`, an in-memory fold in the
tests), and the model is any `ModelClient`. One turn:

1. pre-turn, before anything of the turn is recorded: the previous-model check (comp_hash_changed, then
   model_downshift, compacting with the *previous* model), then the limit check with the current model
   (context_limit); both phase `pre_turn`. A failed pre-turn compaction ends the turn without sampling and the user
   input is not recorded (spec §6.5, primary snapshot; later upstream keeps it).
2. context: the full initial context when the session has no baseline (first turn, or after a compaction that
   cleared it, spec §5.3), then a `turn_context` line, then the user message.
3. sampling: stream a request with the live history; a response's output items are recorded with its usage after
   them in one write when it completes (spec §3.2), or on their own when the stream fails after they completed;
   retryable provider errors are retried with backoff (spec §6.2); function calls run
   on the simulated tools and their outputs are recorded; `new_context` requests a new window (spec §4.4).
4. mid-turn, after each request that needs a follow-up (a tool output pending): compact when a new window was
   requested or the limit is reached (phase `mid_turn`), then sample again. A final answer never compacts, even
   over the limit: the next turn's pre-turn check does it.
5. a provider or compaction failure ends the turn with an `error` line; the turn always ends with `turn_complete`.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from compaction_app.engine import thresholds
from compaction_app.engine.history import text_only_view
from compaction_app.engine.items import Item, message_text, needs_client_output, output_call_id, user_message
from compaction_app.engine.port import ModelClient, ResponsesRequest, Usage
from compaction_app.engine.provider_errors import ProviderError
from compaction_app.engine.thresholds import ModelLimits, TokenStatus
from compaction_app.engine.vocabulary import Phase, Reason
from compaction_app.providers.retry import with_retries
from sessions_app.simulator.tools import answer_tool_call, tool_specs

TURN_CONTEXT = "turn_context"
EVENT_MSG = "event_msg"
# A guard against a model that never stops calling tools; Codex has no such cap, a dashboard needs one.
DEFAULT_MAX_SAMPLING_REQUESTS = 64


@dataclass(frozen=True)
class TurnState:
    """What the loop reads from the session between steps; every field is an O(1) read."""

    thread_id: str
    window_number: int
    window_id: str
    first_window_id: str
    previous_window_id: str
    active_tokens: int
    prefill: int | None
    scope: str
    current: ModelLimits
    previous: ModelLimits | None
    reference_context_set: bool
    last_seq: int = 0
    # The previous turn's settings (cwd, approval_policy, sandbox_policy, model) as its turn_context recorded them.
    previous_settings: Mapping[str, Any] = field(default_factory=dict)

    def token_status(self) -> TokenStatus:
        """The limit check with the current model (spec §2.3)."""
        return thresholds.token_status(
            active_tokens=self.active_tokens,
            context_window=self.current.context_window,
            effective_percent=self.current.effective_percent,
            configured_limit=self.current.configured_limit,
            scope=self.scope,
            prefill=self.prefill,
        )


@dataclass(frozen=True)
class UsageRecord:
    """A model response's usage, recorded as a `token_count` line after its items (spec §3.2)."""

    usage: Usage
    reasoning_included: bool = False


@dataclass(frozen=True)
class Marker:
    """A rollout line that is not an item: `turn_context` or an `event_msg`."""

    kind: str
    payload: dict[str, Any]


def estimate_marker() -> Marker:
    """A meter recompute from the history (spec §3.2); the store fills in the estimate."""
    return Marker(EVENT_MSG, {"type": "token_count", "source": "estimate", "info": {"last_token_usage": {}}})


Record = dict | UsageRecord | Marker  # an item (dict), a usage, or a marker line


class TurnCompactionFailed(Exception):
    """An automatic compaction the turn needed did not install (failed, refused, interrupted)."""

    def __init__(self, message: str, *, code: str = "compaction_failed") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class TurnPort(Protocol):
    """What the loop needs from the session store. Calls happen one at a time, in the order of the turn."""

    async def state(self) -> TurnState: ...

    async def history(self) -> Sequence[Item]:
        """The live model-visible history (the next request's input), as a snapshot: what the turn records later
        must not change it (a copy, or a `HistorySnapshot` of an append-only list)."""

    async def initial_context(self, state: TurnState) -> list[Item]:
        """The full initial context to inject for the window `state` describes (spec §5.3)."""

    async def record(self, records: Sequence[Record]) -> None:
        """Append records to the rollout, in order, atomically."""

    async def compact(self, *, reason: Reason, phase: str, compact_with: ModelLimits | None) -> None:
        """Run an automatic compaction under the turn's lease; raise TurnCompactionFailed when nothing installed."""

    async def heartbeat(self) -> None:
        """Called between requests: keep the turn's lease alive."""

    async def publish(self, kind: str, detail: dict[str, Any]) -> None:
        """A transient event for the live UI (not a rollout line): a stream retry's "Reconnecting...". A turn's
        start, requests and end are not published apart: its rollout lines, which every page follows, say it."""


@dataclass
class TurnConfig:
    """How to run turns of one session: instructions, tools, retry settings, and injectable sleep/rng."""

    base_instructions: str = ""
    tools: Mapping[str, Any] = field(default_factory=dict)
    tool_rng: Callable[[str], random.Random] = lambda call_id: random.Random(call_id)
    stream_max_retries: int = 5
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    retry_rng: random.Random | None = None
    reasoning: dict[str, Any] | None = None
    max_sampling_requests: int = DEFAULT_MAX_SAMPLING_REQUESTS
    turn_context: dict[str, Any] = field(default_factory=dict)
    # Tool specs to send when no simulated tools run (API sessions declare their own), and parallel_tool_calls.
    request_tools: list[dict[str, Any]] = field(default_factory=list)
    parallel_tool_calls: bool = False
    # A settings change the turn carries (spec §5.3): any of cwd, approval_policy, sandbox_policy, model.
    settings_change: Mapping[str, Any] = field(default_factory=dict)
    # Off for a provider whose model takes no image input: requests carry the placeholder text (spec §6).
    supports_images: bool = True


@dataclass(frozen=True)
class CompactionStep:
    reason: str
    phase: str
    ok: bool
    error: str = ""


@dataclass
class TurnResult:
    turn_id: str
    status: str = "completed"  # completed | failed
    error_code: str = ""
    error: str = ""
    user_input_recorded: bool = False
    sampling_requests: int = 0
    tool_calls: int = 0
    compactions: list[CompactionStep] = field(default_factory=list)
    final_message: str = ""
    first_seq: int = 0  # the rollout lines the turn wrote (set by the store's wrapper)
    last_seq: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "completed"


@dataclass
class _Sample:
    items: list[Item] = field(default_factory=list)
    usage: Usage | None = None
    reasoning_included: bool = False


TURN_STARTED, TURN_COMPLETE = "turn_started", "turn_complete"
INTERRUPTED_CODE = "turn_interrupted"  # the `error` line's codex_error_info of a turn something else ended


def error_marker(*, turn_id: str, message: str, code: str) -> Marker:
    """The `event_msg` `error` line a failed turn records (spec §1.4 `Error {message, codex_error_info}`)."""
    return Marker(EVENT_MSG, {"type": "error", "turn_id": turn_id, "message": message, "codex_error_info": code})


def turn_complete_marker(turn_id: str, status: str, last_message: str) -> Marker:
    """The `turn_complete` line that ends every turn (completed, failed, or interrupted: `sessions_app/turns/ends`)."""
    return Marker(
        EVENT_MSG,
        {"type": TURN_COMPLETE, "turn_id": turn_id, "status": status, "last_agent_message": last_message or None},
    )


def _window_correlation(state: TurnState) -> dict[str, str]:
    # spec §3.3: every request names the current window as "<thread_id>:<window_number>".
    return {"x-codex-window-id": f"{state.thread_id}:{state.window_number}"}




SETTINGS_KEYS = ("cwd", "approval_policy", "sandbox_policy", "model")
MODEL_OVERRIDE_KEY = "model_override"


def previous_settings_from_turn_context(payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings a previous turn_context carries forward: cwd and policies, and the model only when a client
    chose it (the recorded `model` alone is the provider's model of that turn)."""
    if not payload:
        return {}
    settings = {k: payload[k] for k in SETTINGS_KEYS[:3] if payload.get(k) is not None}
    if payload.get(MODEL_OVERRIDE_KEY):
        settings["model"] = payload[MODEL_OVERRIDE_KEY]
    return settings


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def turn_settings(previous: Mapping[str, Any], change: Mapping[str, Any]) -> dict[str, Any]:
    """The turn's settings: the previous turn's, with the change applied."""
    merged = {k: previous[k] for k in SETTINGS_KEYS if previous.get(k) is not None}
    merged.update({k: v for k, v in change.items() if k in SETTINGS_KEYS and v is not None})
    return merged


def context_update_items(previous: Mapping[str, Any], current: Mapping[str, Any]) -> list[Item]:
    """The context-update messages for what changed between two turns' settings (spec §5.3 diffing, as Codex's
    per-turn context update): a permissions developer message when the approval or sandbox policy changed, a
    `<model_switch>` developer message when the model changed, and an `<environment_context>` user message with
    the new cwd. Nothing when nothing changed."""
    def changed(key: str) -> bool:
        return key in current and current.get(key) != previous.get(key)

    items: list[Item] = []
    if changed("approval_policy") or changed("sandbox_policy"):
        items.append(_developer(_permissions_text(current)))
    if changed("model") and previous.get("model"):
        items.append(_developer(
            f"<model_switch>\nThe user switched the model from {_escape(str(previous['model']))} to "
            f"{_escape(str(current['model']))}.\n</model_switch>"))
    if changed("cwd"):
        items.append(user_message(_with_cwd(f"{ENVIRONMENT_OPEN}\n</environment_context>", str(current["cwd"]))))
    return items


ENVIRONMENT_OPEN = "<environment_context>"
PERMISSIONS_OPEN = "<permissions instructions>"


def context_with_settings(items: Sequence[Item], settings: Mapping[str, Any]) -> list[Item]:
    """The full initial context rendered with the turn's settings (spec §5.3): Codex builds it from the current
    turn context, so after a compaction that cleared the baseline (DoNotInject) a changed cwd is in the
    `<environment_context>` (added when the stored context has none) and changed permissions in the
    `<permissions instructions>`, with no update message after them."""
    out: list[Item] = []
    has_environment = False
    for item in items:
        text = _only_text(item)
        if text is not None and item.get("role") == "user" and text.lstrip().startswith(ENVIRONMENT_OPEN):
            has_environment = True
            if settings.get("cwd") is not None:
                item = user_message(_with_cwd(text, str(settings["cwd"])))
        elif (text is not None and item.get("role") == "developer" and text.lstrip().startswith(PERMISSIONS_OPEN)
              and (settings.get("approval_policy") is not None or settings.get("sandbox_policy") is not None)):
            item = _developer(_permissions_text(settings))
        out.append(item)
    if settings.get("cwd") is not None and not has_environment:
        out.append(user_message(_with_cwd(f"{ENVIRONMENT_OPEN}\n</environment_context>", str(settings["cwd"]))))
    return out


def _only_text(item: Item) -> str | None:
    content = item.get("content") if item.get("type") == "message" else None
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


def _with_cwd(text: str, cwd: str) -> str:
    tag = f"<cwd>{_escape(cwd)}</cwd>"
    start, end = text.find("<cwd>"), text.find("</cwd>")
    if 0 <= start < end:
        return text[:start] + tag + text[end + len("</cwd>"):]
    head, _, rest = text.partition(ENVIRONMENT_OPEN)
    return f"{head}{ENVIRONMENT_OPEN}\n  {tag}{rest}"


def _permissions_text(settings: Mapping[str, Any]) -> str:
    lines = []
    if settings.get("approval_policy") is not None:
        lines.append(f"Approval policy: {_escape(_render(settings['approval_policy']))}")
    if settings.get("sandbox_policy") is not None:
        lines.append(f"Sandbox policy: {_escape(_render(settings['sandbox_policy']))}")
    return f"{PERMISSIONS_OPEN}\n" + "\n".join(lines) + "\n</permissions instructions>"


def _developer(text: str) -> Item:
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def user_input_message(user_input: str | Sequence[dict[str, Any]]) -> Item:
    """The turn's user message: one `input_text` part for a string, or the given content items (text, images)."""
    if isinstance(user_input, str):
        return user_message(user_input)
    return {"type": "message", "role": "user", "content": [dict(part) for part in user_input]}


class _Turn:
    """One turn in flight: its port and result, and the lines not yet written (`pending`: written with the next
    write, so the turn's first lines and its user message are one append)."""

    def __init__(self, port: TurnPort, turn_id: str) -> None:
        self.port = port
        self.turn_id = turn_id
        self.result = TurnResult(turn_id=turn_id)
        self.pending: list[Record] = []

    async def compact(self, reason: Reason, phase: str, compact_with: ModelLimits | None) -> bool:
        """Run a compaction the turn needs; False (the turn then ends, failed) when it did not install."""
        if self.pending:
            # The compaction's own lines must follow the turn's start (spec §2.4 item 4).
            await self.port.record(self.pending)
            self.pending = []
        try:
            await self.port.compact(reason=reason, phase=phase, compact_with=compact_with)
        except TurnCompactionFailed as exc:
            self.result.compactions.append(CompactionStep(reason.value, phase, False, exc.message))
            await self.fail(exc.code, exc.message)
            return False
        self.result.compactions.append(CompactionStep(reason.value, phase, True))
        return True

    async def fail(self, code: str, message: str) -> None:
        result = self.result
        result.status, result.error_code, result.error = "failed", code, message
        await self.port.record([*self.pending, error_marker(turn_id=self.turn_id, message=message, code=code),
                                turn_complete_marker(self.turn_id, "failed", "")])
        self.pending = []


async def run_turn_loop(
    *, port: TurnPort, client: ModelClient, user_input: str | Sequence[dict[str, Any]], turn_id: str,
    config: TurnConfig,
) -> TurnResult:
    """Run one regular turn (spec §2.4) through `port` with `client`; never raises for a provider or compaction
    failure (those end the turn with an error line and `status="failed"`)."""
    turn = _Turn(port, turn_id)
    state = await port.state()
    turn.pending.append(Marker(
        EVENT_MSG, {"type": TURN_STARTED, "turn_id": turn_id, "model_context_window": state.current.usable_window}
    ))
    state = await _pre_turn(turn, state)
    if state is None:
        return turn.result
    model_slug = await _record_input(turn, state, user_input, config)
    await _sample_until_done(turn, client, model_slug, config)
    return turn.result


async def _pre_turn(turn: _Turn, state: TurnState) -> TurnState | None:
    """1. pre-turn: the previous-model check, then the limit check; the user input is not recorded yet. The state
    the turn goes on with, or None when a compaction it needed failed (the turn has ended)."""
    port = turn.port
    reason = thresholds.previous_model_reason(state.previous, state.current, state.active_tokens, state.scope)
    if reason is not None:
        if not await turn.compact(reason, Phase.PRE_TURN, state.previous):
            return None
        state = await port.state()
    if state.token_status().token_limit_reached:
        if not await turn.compact(Reason.CONTEXT_LIMIT, Phase.PRE_TURN, None):
            return None
        state = await port.state()
    return state


async def _record_input(turn: _Turn, state: TurnState, user_input: str | Sequence[dict[str, Any]],
                        config: TurnConfig) -> str:
    """2. context injection (spec §5.3): the full initial context when there is no baseline, else the update for
    what the turn's settings change (diffed against the previous turn's); then the turn's baseline and the user
    message, written with the turn's start. Returns the model the turn samples."""
    settings = turn_settings(state.previous_settings, config.settings_change)
    if config.settings_change.get("model") and "model" not in state.previous_settings:
        # A first model switch: the previous model is the one the session ran so far.
        previous = {**state.previous_settings, "model": state.current.slug}
    else:
        previous = state.previous_settings
    pending = turn.pending
    if not state.reference_context_set:
        # No baseline: one full initial context as of this turn's settings, and no separate update (spec §5.3).
        pending.extend(context_with_settings(await turn.port.initial_context(state), settings))
    else:
        pending.extend(context_update_items(previous, settings))
    model_slug = str(settings.get("model") or state.current.slug)
    recorded = {k: v for k, v in settings.items() if k != "model"}
    if settings.get("model"):
        # A model the client chose stays the session's model for later turns (MODEL_OVERRIDE_KEY carries it);
        # without one, each turn runs the provider's model.
        recorded[MODEL_OVERRIDE_KEY] = model_slug
    pending.append(Marker(TURN_CONTEXT, {
        **_turn_context_payload(turn.turn_id, state.current, config.turn_context),
        **recorded,
        "model": model_slug,
    }))
    pending.append(user_input_message(user_input))
    await turn.port.record(pending)
    turn.pending = []
    turn.result.user_input_recorded = True
    return model_slug


async def _sample_until_done(turn: _Turn, client: ModelClient, model_slug: str, config: TurnConfig) -> None:
    """3-4. the sampling loop with the mid-turn check, until the model answers without a client-executed call
    (or the turn fails)."""
    port, result, turn_id = turn.port, turn.result, turn.turn_id
    specs = tool_specs(config.tools) if config.tools else list(config.request_tools)
    new_window_requested = False
    while True:
        if result.sampling_requests >= config.max_sampling_requests:
            await turn.fail("too_many_requests", f"the turn made {result.sampling_requests} sampling requests "
                                                 "without finishing; stopped")
            return
        state = await port.state()
        history = await port.history()
        request = ResponsesRequest(
            model=model_slug,
            input=history if config.supports_images else text_only_view(history),
            instructions=config.base_instructions,
            tools=specs,
            parallel_tool_calls=config.parallel_tool_calls if specs else False,
            reasoning=config.reasoning,
            prompt_cache_key=state.thread_id,
            client_metadata=_window_correlation(state),
        )
        result.sampling_requests += 1
        recorded: list[Item] = []
        try:
            sample = await _sample_with_retries(port, client, request, config, turn_id, recorded)
        except ProviderError as exc:
            if recorded:
                # Output items without a usage: re-estimate so the meter keeps counting them (spec §3.2).
                turn.pending.append(estimate_marker())
            await turn.fail(exc.kind.value, str(exc))
            return
        await port.heartbeat()

        outputs: list[Item] = []
        for item in sample.items:
            if not needs_client_output(item):
                continue
            result.tool_calls += 1
            output, wants_window = _run_tool(item, config)
            outputs.append(output)
            new_window_requested = new_window_requested or wants_window
        usage = UsageRecord(sample.usage or Usage(), sample.reasoning_included)
        # spec §2.4 item 2: only a client-executed call's output (or queued input; the loop has none) makes the
        # model continue; a call the server already executed needs no follow-up.
        if not outputs:
            # One write per model response: its output items, then its usage (spec §3.2), then what follows.
            result.final_message = _last_assistant_text(sample.items)
            await port.record([*sample.items, usage, turn_complete_marker(turn_id, "completed", result.final_message)])
            return
        await port.record([*sample.items, usage, *outputs])
        state = await port.state()
        if new_window_requested or state.token_status().token_limit_reached:
            if not await turn.compact(Reason.CONTEXT_LIMIT, Phase.MID_TURN, None):
                return
            # spec §9: a new window resets the pending request.
            new_window_requested = False


async def _sample_with_retries(
    port: TurnPort, client: ModelClient, request: ResponsesRequest, config: TurnConfig, turn_id: str,
    recorded: list[Item],
) -> _Sample:
    """One sampling request, retried on retryable errors up to `stream_max_retries` times (spec §6.2).

    The items of a completed response are returned, not recorded: the caller writes them with the response's usage
    in one append. Items of an attempt that fails after they completed stay recorded, as in Codex (spec §6.5 notes
    the same for local compaction); the retry resends the same input. `recorded` counts them so a turn that finally
    fails can re-estimate its meter."""

    async def attempt() -> _Sample:
        sample = _Sample()
        try:
            async for event in client.stream_response(request):
                if event.type == "response.output_item.done" and event.item is not None:
                    sample.items.append(event.item)
                elif event.type == "response.completed":
                    sample.usage = event.usage
                    sample.reasoning_included = event.reasoning_included
        except Exception:
            if sample.items:
                await port.record(sample.items)
                recorded.extend(sample.items)
            raise
        return sample

    async def on_retry(n: int, error: ProviderError, delay: float) -> None:
        await port.publish(
            "stream_error",
            {"turn_id": turn_id, "message": f"Reconnecting... {n}/{config.stream_max_retries}",
             "error": str(error), "delay": round(delay, 3)},
        )

    return await with_retries(
        attempt, max_retries=config.stream_max_retries, sleep=config.sleep, on_retry=on_retry, rng=config.retry_rng
    )


def _run_tool(item: Item, config: TurnConfig) -> tuple[Item, bool]:
    """Every call kind the client executes gets its output in its own shape (spec §2.4 item 2)."""
    return answer_tool_call(item, config.tools, config.tool_rng(output_call_id(item)))


def _last_assistant_text(items: Sequence[Item]) -> str:
    for item in reversed(items):
        if item.get("type") == "message" and item.get("role") == "assistant":
            return message_text(item)
    return ""


def _turn_context_payload(turn_id: str, model: ModelLimits, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The per-turn baseline (spec §1.5 TurnContextItem): our model fields are what the next turn's previous-model
    check reads (spec §2.4 step 1a)."""
    payload: dict[str, Any] = {
        **extra,
        "turn_id": turn_id,
        "model": model.slug,
        "context_window": model.context_window,
        "effective_context_window_percent": model.effective_percent,
    }
    if model.comp_hash:
        payload["comp_hash"] = model.comp_hash
    return payload


def previous_model_from_turn_context(payload: Mapping[str, Any] | None, *, configured_limit: int | None
                                     ) -> ModelLimits | None:
    """The previous turn's model as a turn_context line records it (None when there is no previous turn).

    A line without a window (e.g. written at session start) gives a model with an unknown window, which the
    downshift test never fires on (spec §2.4 step 1a needs both windows)."""
    if not payload or not payload.get("model"):
        return None
    window = payload.get("context_window")
    return ModelLimits(
        slug=str(payload["model"]),
        context_window=int(window) if isinstance(window, int) and window > 0 else None,
        effective_percent=int(payload.get("effective_context_window_percent") or thresholds.DEFAULT_EFFECTIVE_PERCENT),
        configured_limit=configured_limit,
        comp_hash=payload.get("comp_hash") or None,
    )
