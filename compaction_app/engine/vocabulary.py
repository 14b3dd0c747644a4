"""The compaction vocabulary, defined once: every trigger, reason, phase, strategy, implementation and status.

The engine, the providers, the services and the web layer all import these enums; Django's choices are built from
them (`compaction_app.choices.text_choices`) with the labels below, so a new value is added here and nowhere else.
Values are the wire and database strings (spec §1, §2.1, §2.5, §6.4, §7, §10).
"""

from __future__ import annotations

from enum import StrEnum


class Trigger(StrEnum):
    """Who asked for the compaction (spec §10 `trigger`)."""

    MANUAL = "manual"
    AUTO = "auto"


class Reason(StrEnum):
    """Why it ran (spec §10 `reason`)."""

    USER_REQUESTED = "user_requested"
    CONTEXT_LIMIT = "context_limit"
    MODEL_DOWNSHIFT = "model_downshift"
    COMP_HASH_CHANGED = "comp_hash_changed"


# spec §6.4: only these pre-turn reasons compact with the previous model and may fall back to the current one.
MODEL_SWITCH_REASONS = frozenset({Reason.MODEL_DOWNSHIFT, Reason.COMP_HASH_CHANGED})


class Phase(StrEnum):
    """Where in a turn it ran (spec §10 `phase`)."""

    STANDALONE_TURN = "standalone_turn"
    PRE_TURN = "pre_turn"
    MID_TURN = "mid_turn"


class Strategy(StrEnum):
    """How compactweb compacts (spec §2.5): the four implementations a policy may pin."""

    LOCAL = "local"
    REMOTE_V1 = "remote_v1"
    REMOTE_V2 = "remote_v2"
    TOKEN_BUDGET = "token_budget"
    MASKING = "masking"  # observation masking, a compactweb method (engine/strategies/masking.py)

    @property
    def is_remote(self) -> bool:
        return self in (Strategy.REMOTE_V1, Strategy.REMOTE_V2)


class StrategyPreference(StrEnum):
    """A policy's choice: one strategy, or `auto` (select per provider, spec §2.5)."""

    AUTO = "auto"
    LOCAL = "local"
    REMOTE_V1 = "remote_v1"
    REMOTE_V2 = "remote_v2"
    TOKEN_BUDGET = "token_budget"
    MASKING = "masking"


class Implementation(StrEnum):
    """spec §2.1; `token_budget` is compactweb's own label (Codex records no attempt for that path)."""

    RESPONSES = "responses"
    RESPONSES_COMPACT = "responses_compact"
    RESPONSES_COMPACTION_V2 = "responses_compaction_v2"
    TOKEN_BUDGET = "token_budget"
    OBSERVATION_MASKING = "observation_masking"  # compactweb's masking method (and its hybrid)


IMPLEMENTATIONS = {
    Strategy.LOCAL: Implementation.RESPONSES,
    Strategy.REMOTE_V1: Implementation.RESPONSES_COMPACT,
    Strategy.REMOTE_V2: Implementation.RESPONSES_COMPACTION_V2,
    Strategy.TOKEN_BUDGET: Implementation.TOKEN_BUDGET,
    Strategy.MASKING: Implementation.OBSERVATION_MASKING,
}

# spec §10: the `strategy` field of Codex's analytics record is always this value.
STRATEGY_MEMENTO = "memento"

# The longest extra instructions a manual compaction takes, from the session page and the API alike (they are one
# action). They are appended to the summarisation prompt, so they are bounded; 20,000 characters (about 5,000
# tokens) is what the API has always accepted, and lowering it to the page's old 4,000 would break API callers
# that work today for no gain: a prompt that no longer fits the window is refused by the engine with its reason.
MAX_EXTRA_INSTRUCTIONS = 20_000


class AttemptStatus(StrEnum):
    """An attempt's outcome; `running` only while it runs (spec §6.5, §10)."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class Scope(StrEnum):
    """What the auto-compact limit is compared with (spec §2.3)."""

    TOTAL = "total"
    BODY_AFTER_PREFIX = "body_after_prefix"


class RemoteSupport(StrEnum):
    """What a provider's server offers: nothing, `/responses/compact` (v1), or v1 and the v2 trigger (v2)."""

    NONE = "none"
    V1 = "v1"
    V2 = "v2"


class HookEvent(StrEnum):
    PRE_COMPACT = "pre_compact"
    POST_COMPACT = "post_compact"
    ALERT = "alert"  # compactweb: a storm / loop / re-read / failure-streak alert (engine/alerts.py)

    @property
    def wire_name(self) -> str:
        """`hook_event_name` in the request (spec §7)."""
        return {"pre_compact": "PreCompact", "post_compact": "PostCompact"}.get(self.value, "Alert")


class HookKind(StrEnum):
    CALLABLE = "callable"
    WEBHOOK = "webhook"


class HookMatcher(StrEnum):
    ANY = "any"
    MANUAL = "manual"
    AUTO = "auto"


class HookStatus(StrEnum):
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"


class PinMode(StrEnum):
    """What a compaction does with pinned context: put it back after the replacement history, or only check it."""

    REINJECT = "reinject"
    CHECK_ONLY = "check_only"


# The words people read (admin, forms, pages), per vocabulary; the values above are what is stored and sent.
# Keyed by enum class: StrEnum members compare equal to their strings, so one dict of members would merge
# `Strategy.TOKEN_BUDGET` with `Implementation.TOKEN_BUDGET`.
_STRATEGY_LABELS = {
    "local": "local summarisation",
    "remote_v1": "remote compaction v1",
    "remote_v2": "remote compaction v2",
    "token_budget": "new window (token budget)",
    "masking": "observation masking (no model call)",
}
LABELS: dict[type[StrEnum], dict[str, str]] = {
    Trigger: {"manual": "manual", "auto": "auto"},
    Reason: {
        "user_requested": "user requested", "context_limit": "context limit",
        "model_downshift": "model downshift", "comp_hash_changed": "comp hash changed",
    },
    Phase: {"standalone_turn": "standalone turn", "pre_turn": "pre-turn", "mid_turn": "mid-turn"},
    Strategy: _STRATEGY_LABELS,
    StrategyPreference: {"auto": "auto (select per provider, §2.5)", **_STRATEGY_LABELS},
    # An implementation reads as the method it implements (h17: "local summarisation", not "responses").
    Implementation: {IMPLEMENTATIONS[Strategy(value)].value: text for value, text in _STRATEGY_LABELS.items()},
    AttemptStatus: {"running": "running", "completed": "completed", "failed": "failed", "interrupted": "interrupted"},
    Scope: {"total": "total", "body_after_prefix": "body after prefix"},
    RemoteSupport: {
        "none": "none (local summarisation only)",
        "v1": "v1: POST /responses/compact",
        "v2": "v2: streamed /responses with compaction_trigger",
    },
    HookEvent: {
        "pre_compact": "PreCompact", "post_compact": "PostCompact",
        "alert": "Alert (storm, loop, re-read, failure streak)",
    },
    HookKind: {"callable": "Python callable", "webhook": "Webhook (HTTP POST)"},
    HookMatcher: {"any": "any trigger", "manual": "manual only", "auto": "auto only"},
    HookStatus: {"completed": "completed", "stopped": "stopped", "failed": "failed"},
    PinMode: {
        "reinject": "re-inject pins after the replacement history",
        "check_only": "only check pins (flag a compaction that loses one)",
    },
}


def label(member: StrEnum) -> str:
    """The human label of one vocabulary member."""
    return LABELS[type(member)][member.value]


def method_label(value: str) -> str | None:
    """The plain words for a compaction method, whichever value names it: a strategy (`local`) or the implementation
    Codex records (`responses`); None for a value that names no method."""
    return LABELS[Strategy].get(value) or LABELS[Implementation].get(value)


# Codes a page shows that are not stored choices: where the initial context went (spec §5.3) and the progress
# events a session page names while a compaction is queued or runs (sessions_app.jobs' `job.*` events; the
# engine's events as `compaction.<type>`, spec §11).
CODE_LABELS = {
    "do_not_inject": "not injected (a new window starts without it)",
    "before_last_user_message": "before the last user message",
}
PROGRESS_LABELS = {
    "job.queued": "queued behind the session's running step",
    "job.running": "started",
    "job.finished": "finished",
    "compaction.started": "started",
    "compaction.stream_error": "reconnecting",
    "compaction.hook_started": "hook running",
    "compaction.hook_completed": "hook done",
    "compaction.item_started": "working",
    "compaction.item_completed": "item done",
    "compaction.context_compacted": "installed",
    "compaction.warning": "warning",
    "compaction.error": "error",
    "compaction.turn_started": "started",
    "compaction.turn_complete": "done",
    "compaction.turn_aborted": "stopped",
    "compaction.raw_response_item": "answer arriving",
    "compaction.token_count": "counting tokens",
}
PROGRESS_PREFIX = "compaction."  # an engine event the list above does not name reads as its type, in words
# Where the same code means different things in two vocabularies, the first one here names it on pages: the
# labels of what pages show most (a compaction's method, trigger, reason, phase, status).
_PAGE_VOCABULARIES = (Strategy, Implementation, Trigger, Reason, Phase, AttemptStatus, HookEvent, HookKind,
                      HookStatus, PinMode, Scope, RemoteSupport)
PAGE_LABELS: dict[str, str] = {}
for _vocabulary in reversed(_PAGE_VOCABULARIES):
    PAGE_LABELS.update(LABELS[_vocabulary])
PAGE_LABELS.update(CODE_LABELS)


def code_label(value: str) -> str:
    """The words a page shows for a stored or sent code, from the one vocabulary above (`remote_v2` -> "remote
    compaction v2", `job.running` -> "started"); a code it does not name reads with spaces for underscores."""
    return PAGE_LABELS.get(value) or PROGRESS_LABELS.get(value) or value.removeprefix(PROGRESS_PREFIX).replace("_", " ")
