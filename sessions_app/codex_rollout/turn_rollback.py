"""Thread rollback by user turns (spec §8.3, Codex `Op::ThreadRollback {num_turns}`).

Works on whatever the live history is; after a compaction that is the replacement history, whose kept user
messages and summary are ordinary user-turn boundaries, so a long rollback eats into it one message at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from compaction_app.engine.items import (
    Item,
    is_contextual_user_message,
    is_hook_prompt_message,
    is_message,
    is_user_turn_boundary,
)

NUM_TURNS_ERROR = "num_turns must be >= 1"

# Developer fragments that Codex re-injects before a turn and that a rollback trims with the turn (PR #15577).
CONTEXTUAL_DEVELOPER_PREFIXES = (
    "<permissions instructions>",
    "<model_switch>",
    "<collaboration_mode>",
    "<realtime_conversation>",
    "<personality_spec>",
    "<token_budget>",
    "<context_window>",
)


class ThreadRollbackError(ValueError):
    """A thread rollback that cannot run (Codex reports it with `codex_error_info: thread_rollback_failed`)."""

    codex_error_info = "thread_rollback_failed"


@dataclass(frozen=True)
class ThreadRollback:
    """Result of dropping user turns: the surviving history, where it was cut, and whether a trimmed developer
    message mixed injected and persistent text (then the stored context baseline must be cleared)."""

    history: list[Item]
    cut_index: int
    removed_count: int
    clears_baseline: bool


def _developer_parts(item: Item) -> list[tuple[str, str | None]]:
    content = item.get("content")
    if isinstance(content, str):
        return [("input_text", content)]
    if not isinstance(content, list):
        return []
    return [
        (p.get("type", ""), p.get("text") if isinstance(p.get("text"), str) else None)
        for p in content
        if isinstance(p, dict)
    ]


def _is_contextual_dev_part(part_type: str, text: str | None) -> bool:
    if part_type != "input_text" or text is None:
        return False
    head = text.lstrip().lower()
    return any(head.startswith(prefix) for prefix in CONTEXTUAL_DEVELOPER_PREFIXES)


def is_contextual_developer_message(item: Item) -> bool:
    """A developer message with at least one injected-context fragment (spec §8.3)."""
    return is_message(item, "developer") and any(_is_contextual_dev_part(t, x) for t, x in _developer_parts(item))


def has_persistent_developer_text(item: Item) -> bool:
    """A developer message with at least one fragment that is not injected context (spec §8.3)."""
    return is_message(item, "developer") and any(
        not _is_contextual_dev_part(t, x) for t, x in _developer_parts(item)
    )


def is_injected_context(item: Item) -> bool:
    """An item of the initial context a turn injects (spec §5.3): a contextual developer message, or a contextual
    user message (AGENTS.md, environment context, ...). Hook prompts are contextual but not injected context."""
    return is_contextual_developer_message(item) or (
        is_contextual_user_message(item) and not is_hook_prompt_message(item)
    )


def drop_last_user_turns(history: list[Item], num_turns: int) -> ThreadRollback:
    """Drop the newest `num_turns` user turns as rollout replay does: 0 is a no-op (spec §8.2 step 2, §8.3).

    The cut sits at the N-th last user-turn boundary (at the first one when N exceeds the count, keeping
    what came before the first user message); the contiguous run of injected-context items directly above the
    cut goes too, never crossing the first boundary.
    """
    unchanged = ThreadRollback(history=list(history), cut_index=len(history), removed_count=0, clears_baseline=False)
    if num_turns <= 0:
        return unchanged
    positions = [i for i, item in enumerate(history) if is_user_turn_boundary(item)]
    if not positions:
        return unchanged
    first = positions[0]
    cut = first if num_turns >= len(positions) else positions[len(positions) - num_turns]
    clears_baseline = False
    while cut > first:
        above = history[cut - 1]
        if not (is_contextual_developer_message(above) or is_contextual_user_message(above)):
            break
        if is_contextual_developer_message(above):
            clears_baseline = clears_baseline or has_persistent_developer_text(above)
        cut -= 1
    if not clears_baseline and any(is_injected_context(i) for i in history[cut:]):
        # The dropped turns held the only injected context left (e.g. the full re-injection after a compaction
        # that cleared the baseline): with it gone the baseline must go too, or the next request carries no
        # context at all. Codex restores the baseline of the newest surviving turn, which a compaction after it
        # cleared (spec §8.2), so the next turn re-injects the full context once.
        clears_baseline = not any(is_injected_context(i) for i in history[:cut])
    return ThreadRollback(
        history=list(history[:cut]),
        cut_index=cut,
        removed_count=len(history) - cut,
        clears_baseline=clears_baseline,
    )


def plan_thread_rollback(history: list[Item], num_turns: int) -> ThreadRollback:
    """The `Op::ThreadRollback` operation: like `drop_last_user_turns` but `num_turns` must be >= 1 (spec §8.3)."""
    if not isinstance(num_turns, int) or isinstance(num_turns, bool):
        raise ThreadRollbackError("num_turns must be an integer")
    if num_turns < 1:
        raise ThreadRollbackError(NUM_TURNS_ERROR)
    return drop_last_user_turns(history, num_turns)


def rollback_turns(history: list[Item], num_turns: int) -> list[Item]:
    """The history left after rolling back the last `num_turns` user turns (spec §8.3).

    Raises ThreadRollbackError("num_turns must be >= 1") for 0 or less. Use `plan_thread_rollback` to also
    learn whether the stored context baseline must be cleared.
    """
    return plan_thread_rollback(history, num_turns).history
