"""History transforms of compaction (spec §5, §6.1, §6.3): pure functions over lists of item dicts.

Nothing here mutates its input: every function returns new lists (items that are not rewritten are shared).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from compaction_app.engine.items import (
    COMPACTION_KINDS,
    TOOL_OUTPUT_KINDS,
    Item,
    is_hook_prompt_message,
    is_message,
    is_real_user_message,
    is_summary_message,
    is_user_turn_boundary,
    message_text,
    normalize_kind,
    user_message,
)
from compaction_app.engine.tokens import approx_token_count, estimate_item_tokens

COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000
RETAINED_MESSAGE_TOKEN_BUDGET = 64_000
NO_SUMMARY_TEXT = "(no summary available)"
CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE = "Output exceeded the available model context and was truncated"
# Codex answers a call whose output never arrived with this body so the request stays well-formed.
ABORTED_OUTPUT_TEXT = "aborted"
IMAGE_OMITTED_TEXT = "image content omitted because you do not support image input"

_TEXT_PART_KINDS = ("input_text", "output_text", "text")


class Injection(StrEnum):
    """Where initial context goes in a replacement history (spec §5.3)."""

    DO_NOT_INJECT = "do_not_inject"
    BEFORE_LAST_USER_MESSAGE = "before_last_user_message"


# --- §5.1 local replacement history ---------------------------------------------------------------------


def collect_user_messages(items: Iterable[Item]) -> list[str]:
    """Texts of the real user messages, oldest first, summaries and injected context excluded (spec §1.2, §4.1.7)."""
    return [message_text(item) for item in items if is_real_user_message(item)]


def _utf8_prefix(data: bytes, budget: int) -> bytes:
    """The longest prefix of whole characters that fits in `budget` bytes."""
    end = min(budget, len(data))
    # A continuation byte (10xxxxxx) at `end` means a character straddles the cut: back off to its start.
    while 0 < end < len(data) and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end]


def _utf8_suffix(data: bytes, budget: int) -> bytes:
    """The longest suffix of whole characters that fits in `budget` bytes."""
    start = max(0, len(data) - budget)
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def truncate_middle(text: str, max_tokens: int) -> str:
    """Middle-truncate `text` to `max_tokens` approximate tokens (spec §5.1, Codex `truncate_text` Tokens policy).

    Keeps the first floor(4T/2) and the last 4T - floor(4T/2) bytes on character boundaries and puts
    `…{N} tokens truncated…` between them, N = ceil((bytes - 4T) / 4). The marker is not charged against T.
    """
    if max_tokens < 0:
        raise ValueError("max_tokens must be >= 0")
    if not text:
        return ""
    data = text.encode("utf-8")
    budget = max_tokens * 4
    if max_tokens > 0 and len(data) <= budget:
        return text
    removed = approx_token_count_bytes(len(data) - budget)
    marker = f"…{removed} tokens truncated…"
    if max_tokens == 0:
        return marker
    left = budget // 2
    head = _utf8_prefix(data, left)
    tail = _utf8_suffix(data, budget - left)
    if len(head) + len(tail) > len(data):  # cannot happen when len(data) > budget; kept for safety
        tail = data[len(head) :]
    return head.decode("utf-8") + marker + tail.decode("utf-8")


def approx_token_count_bytes(n_bytes: int) -> int:
    return (max(0, n_bytes) + 3) // 4


def select_user_messages(user_messages: list[str], max_tokens: int = COMPACT_USER_MESSAGE_MAX_TOKENS) -> list[str]:
    """Keep the newest user-message texts within `max_tokens`; the first that does not fit is middle-truncated
    and older ones are dropped (spec §5.1)."""
    selected: list[str] = []
    if max_tokens > 0:
        remaining = max_tokens
        for text in reversed(user_messages):
            if remaining == 0:
                break
            tokens = approx_token_count(text)
            if tokens <= remaining:
                selected.append(text)
                remaining -= tokens
            else:
                selected.append(truncate_middle(text, remaining))
                break
        selected.reverse()
    return selected


def build_compacted_history(
    initial_context: list[Item],
    user_messages: list[str],
    summary_text: str,
    *,
    max_tokens: int = COMPACT_USER_MESSAGE_MAX_TOKENS,
) -> list[Item]:
    """Local replacement history: initial context, selected user messages, then the summary (spec §5.1).

    An empty summary becomes "(no summary available)".
    """
    history = list(initial_context)
    history.extend(user_message(text) for text in select_user_messages(user_messages, max_tokens))
    history.append(user_message(summary_text or NO_SUMMARY_TEXT))
    return history


def last_assistant_text(items: list[Item]) -> str | None:
    """Text of the newest assistant message with non-empty output text (spec §4.1 step 6)."""
    for item in reversed(items):
        if is_message(item, "assistant"):
            content = item.get("content")
            if isinstance(content, str):
                text = content
            else:
                text = "".join(
                    p.get("text", "")
                    for p in content or []
                    if isinstance(p, dict) and p.get("type") == "output_text"
                )
            if text:
                return text
    return None


# --- §5.2 remote output filter --------------------------------------------------------------------------


def should_keep_compacted_history_item(item: Item) -> bool:
    """Whether an item of remote compaction output (or v2 retention) stays in the replacement history (spec §5.2).

    Kept: real user messages (summaries included), hook prompts, assistant messages, compaction items.
    """
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        if role == "user":
            return is_user_turn_boundary(item) or is_hook_prompt_message(item)
        return role == "assistant"
    if kind == "agent_message":
        return True
    return kind in COMPACTION_KINDS or kind == "compaction_summary"


def filter_compacted_output(items: list[Item]) -> list[Item]:
    """Apply §5.2 to a remote output, writing the `compaction_summary` alias back as `compaction` (spec §1.1)."""
    return [normalize_kind(item) for item in items if should_keep_compacted_history_item(item)]


# --- §5.3 initial-context injection ---------------------------------------------------------------------


def insertion_index(history: list[Item]) -> int | None:
    """Where BeforeLastUserMessage inserts context: before the last real user message, else before the last
    summary (user-message-like item), else before the last compaction item; None means append (spec §5.3)."""
    last_user_like: int | None = None
    for i in range(len(history) - 1, -1, -1):
        item = history[i]
        if not is_user_turn_boundary(item):
            continue
        if last_user_like is None:
            last_user_like = i
        if not is_summary_message(item):
            return i
    if last_user_like is not None:
        return last_user_like
    for i in range(len(history) - 1, -1, -1):
        if history[i].get("type") in COMPACTION_KINDS:
            return i
    return None


def inject_initial_context(history: list[Item], initial_context: list[Item], injection: Injection) -> list[Item]:
    """Insert the initial context per the injection mode (spec §5.3). DoNotInject returns the history as is."""
    if injection == Injection.DO_NOT_INJECT or not initial_context:
        return list(history)
    index = insertion_index(history)
    if index is None:
        return [*history, *initial_context]
    return [*history[:index], *initial_context, *history[index:]]


# --- §5.4 remote v2 retention ---------------------------------------------------------------------------


def _message_text_tokens(item: Item) -> int:
    content = item.get("content")
    if isinstance(content, str):
        return approx_token_count(content)
    return sum(
        approx_token_count(p.get("text", ""))
        for p in content or []
        if isinstance(p, dict) and p.get("type") in _TEXT_PART_KINDS
    )


def _truncate_message_parts(item: Item, max_tokens: int) -> Item | None:
    """Keep text parts in order while they fit, middle-truncate the first that does not, drop later text;
    non-text parts (images) always stay; empty text parts go. None when nothing is left (spec §5.4 step 3)."""
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    remaining = max_tokens
    kept: list = []
    for part in content or []:
        if isinstance(part, dict) and part.get("type") in _TEXT_PART_KINDS:
            if remaining == 0:
                continue
            text = part.get("text", "")
            tokens = approx_token_count(text)
            if tokens <= remaining:
                remaining -= tokens
            else:
                text = truncate_middle(text, remaining)
                part = {**part, "text": text}
                remaining = 0
            if text:
                kept.append(part)
        else:
            kept.append(part)
    if not kept:
        return None
    return {**item, "content": kept}


def truncate_retained_messages(items: list[Item], max_tokens: int = RETAINED_MESSAGE_TOKEN_BUDGET) -> list[Item]:
    """Budget walk newest→oldest over retained messages; cost = text tokens, minimum 1 (spec §5.4 step 3)."""
    remaining = max_tokens
    kept_reversed: list[Item] = []
    for item in reversed(items):
        if remaining == 0:
            continue
        cost = max(1, _message_text_tokens(item))
        if cost <= remaining:
            kept_reversed.append(item)
            remaining -= cost
        else:
            truncated = _truncate_message_parts(item, remaining)
            if truncated is not None:
                kept_reversed.append(truncated)
                remaining = 0
    kept_reversed.reverse()
    return kept_reversed


def count_input_images(items: Iterable[Item]) -> int:
    return sum(
        1
        for item in items
        if is_message(item)
        for part in (item.get("content") if isinstance(item.get("content"), list) else [])
        if isinstance(part, dict) and part.get("type") == "input_image"
    )


def build_v2_retained_history(
    prompt_input: list[Item], compaction_item: Item, *, max_tokens: int = RETAINED_MESSAGE_TOKEN_BUDGET
) -> tuple[list[Item], int]:
    """Retained user messages of the request input plus the server's compaction item last (spec §5.4).

    Only user/developer/system messages are candidates, the §5.2 filter runs before the budget, and the
    retained image count is returned for analytics.
    """
    candidates = [
        item
        for item in prompt_input
        if is_message(item) and item.get("role") in ("user", "developer", "system")
        and should_keep_compacted_history_item(item)
    ]
    retained = truncate_retained_messages(candidates, max_tokens)
    images = count_input_images(retained)
    return [*retained, normalize_kind(compaction_item)], images


# --- §6.3 output trimming before remote compaction ------------------------------------------------------


@dataclass(frozen=True)
class TrimResult:
    items: list[Item]
    rewritten_outputs: int
    estimated_deleted_tokens: int


def rewritten_output(item: Item) -> Item | None:
    """The context-window-truncated form of a tool output, or None if the item is not one (spec §6.3)."""
    kind = item.get("type")
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        if isinstance(output, dict):
            # A structured payload keeps its `success` flag; only the body is replaced.
            new_output: object = {"content": CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE}
            if "success" in output:
                new_output["success"] = output["success"]  # type: ignore[index]
        else:
            new_output = CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE
        return {**item, "output": new_output}
    if kind == "tool_search_output":
        return {**item, "tools": []}
    return None


def trim_outputs_to_fit(
    items: list[Item],
    usable_window: int | None,
    *,
    base_instructions: str = "",
    count_item: Callable[[Item], int] = estimate_item_tokens,
    count_text: Callable[[str], int] = approx_token_count,
    item_tokens: list[int] | None = None,
) -> TrimResult:
    """Rewrite tool outputs from the newest backwards while the history is over the usable window, stopping at
    the first item that is not a tool output (spec §6.3). Returns the new list, the count and deleted tokens."""
    if usable_window is None:
        return TrimResult(list(items), 0, 0)
    out = list(items)
    tokens = list(item_tokens) if item_tokens is not None else [count_item(i) for i in out]
    if len(tokens) != len(out):
        raise ValueError("item_tokens must have one count per item")
    total = count_text(base_instructions) + sum(tokens)
    rewritten = 0
    deleted = 0
    for index in range(len(out) - 1, -1, -1):
        if total <= usable_window:
            break
        new_item = rewritten_output(out[index])
        if new_item is None:
            break
        before = tokens[index]
        after = count_item(new_item)
        out[index] = new_item
        total += after - before
        rewritten += 1
        deleted += max(0, before - after)
    return TrimResult(out, rewritten, deleted)


# --- request normalisation and §6.1 trimming -----------------------------------------------------------


def _missing_output_for(call: Item) -> Item:
    kind = call.get("type")
    call_id = call.get("call_id")
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": ABORTED_OUTPUT_TEXT}
    if kind == "tool_search_call":
        return {"type": "tool_search_output", "call_id": call_id, "status": "completed", "execution": "client",
                "tools": []}
    return {"type": "function_call_output", "call_id": call_id, "output": ABORTED_OUTPUT_TEXT}


IMAGE_TOOL_OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")


def _without_images(parts: list) -> list | None:
    """`parts` with every `input_image` replaced by the placeholder text; None when there was none."""
    if not any(isinstance(p, dict) and p.get("type") == "input_image" for p in parts):
        return None
    return [{"type": "input_text", "text": IMAGE_OMITTED_TEXT}
            if isinstance(p, dict) and p.get("type") == "input_image" else p for p in parts]


def _strip_images(item: Item) -> Item:
    """A text-only model's view of an item, as Codex's normaliser gives it: an image part of a message or of a
    tool output's content becomes the placeholder text, and a generated image's result is dropped."""
    kind = item.get("type")
    if kind == "image_generation_call" and item.get("result"):
        return {**item, "result": ""}
    key = "output" if kind in IMAGE_TOOL_OUTPUT_KINDS else "content" if is_message(item) else None
    parts = item.get(key) if key else None
    if not isinstance(parts, list):
        return item
    stripped = _without_images(parts)
    return item if stripped is None else {**item, key: stripped}


def text_only_view(items: Iterable[Item]) -> list[Item]:
    """Every item as a text-only model gets it (`_strip_images`): what a turn's request sends to a provider
    without image input; the stored history keeps its images."""
    return [_strip_images(item) for item in items]


def normalize_for_request(items: list[Item], *, supports_images: bool = True) -> list[Item]:
    """The model-visible form of a history (Codex `for_prompt`, spec §4.1 step 3, §1.1).

    Ghost snapshots and compaction triggers are removed, `compaction_summary` is written as `compaction`, every
    tool call gets an output (a synthetic "aborted" one right after it when missing), outputs without a call are
    dropped, and images become a placeholder text for text-only models.
    """
    cleaned = [
        normalize_kind(item)
        for item in items
        if item.get("type") not in ("ghost_snapshot", "compaction_trigger")
    ]
    calls = {_pairing(i, CALL_PAIRS) for i in cleaned} - {None}
    outputs = {_pairing(i, OUTPUT_PAIRS) for i in cleaned} - {None}
    out: list[Item] = []
    for item in cleaned:
        kind = item.get("type")
        if kind in TOOL_OUTPUT_KINDS and _pairing(item, OUTPUT_PAIRS) not in calls and not _server_output(item):
            continue
        out.append(item if supports_images else _strip_images(item))
        pairing = _pairing(item, CALL_PAIRS)
        if pairing is not None and pairing not in outputs:
            out.append(_missing_output_for(item))
    return out


# Which output answers which call, as Codex's normaliser pairs them: by kind as well as by call id. A function
# call and a local shell call are answered by a function_call_output, a custom tool call by a
# custom_tool_call_output, a tool search call by a tool_search_output; an output of another kind with the same id
# answers nothing (it is dropped as an orphan, and the call gets its synthetic "aborted" output).
CALL_PAIRS = {"function_call": "function", "local_shell_call": "function", "custom_tool_call": "custom",
              "tool_search_call": "tool_search"}
OUTPUT_PAIRS = {"function_call_output": "function", "custom_tool_call_output": "custom",
                "tool_search_output": "tool_search"}


def _pairing(item: Item, pairs: dict[str, str]) -> tuple[str, str] | None:
    """(family, call id) of a call or output. Codex keys by the id string, the empty string included: a call
    whose id is "" still gets its "aborted" output, and an output whose id is "" answers it."""
    family = pairs.get(item.get("type"))
    call_id = item.get("call_id")
    return (family, call_id) if family and isinstance(call_id, str) else None


def _server_output(item: Item) -> bool:
    """A tool search output Codex keeps without a call: one the server ran (`execution: "server"`, whatever
    its call id) or one with no call id at all."""
    return item.get("type") == "tool_search_output" and (
        item.get("execution") == "server" or item.get("call_id") is None)


# The partner of the oldest item, by kind (Codex's remove_corresponding_for): a function output's call is a
# function call, else a local shell call; every other kind has one partner kind.
PARTNER_KINDS = {
    "function_call": ("function_call_output",), "local_shell_call": ("function_call_output",),
    "custom_tool_call": ("custom_tool_call_output",), "tool_search_call": ("tool_search_output",),
    "function_call_output": ("function_call", "local_shell_call"),
    "custom_tool_call_output": ("custom_tool_call",), "tool_search_output": ("tool_search_call",),
}


def remove_oldest_item(items: list[Item]) -> list[Item]:
    """Drop the oldest item and its call/output partner of the matching kind (spec §6.1)."""
    if not items:
        return []
    first, rest = items[0], items[1:]
    call_id = first.get("call_id")
    if not isinstance(call_id, str):
        return list(rest)
    for partner_kind in PARTNER_KINDS.get(first.get("type"), ()):
        for i, item in enumerate(rest):
            if item.get("type") == partner_kind and item.get("call_id") == call_id:
                return rest[:i] + rest[i + 1 :]
    return list(rest)
