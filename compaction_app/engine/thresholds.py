"""When to compact: usable window, auto-compact limit, the two limit scopes and the model-switch checks
(spec §2.2-§2.4)."""

from __future__ import annotations

from dataclasses import dataclass

from compaction_app.engine.vocabulary import Reason, Scope

# spec §2.2: what Codex assumes for a model it has no metadata for.
DEFAULT_CONTEXT_WINDOW = 272_000
DEFAULT_EFFECTIVE_PERCENT = 95




def _check_window(context_window: int | None) -> None:
    if context_window is not None and context_window < 0:
        raise ValueError("context_window must be >= 0")


def usable_window(context_window: int | None, effective_percent: int = DEFAULT_EFFECTIVE_PERCENT) -> int | None:
    """The usable ("model") context window: window × percent / 100 with integer division (spec §2.2).

    272000 at 95% → 258400. None when the window is unknown.
    """
    _check_window(context_window)
    if not 0 <= effective_percent <= 100:
        raise ValueError("effective_percent must be between 0 and 100")
    if context_window is None:
        return None
    return context_window * effective_percent // 100


def auto_compact_limit(context_window: int | None, configured: int | None = None) -> int | None:
    """The auto-compact token limit: min(configured or 90%, 90%) of a known window, else the configured value
    (spec §2.2). 272000 → 244800; configured 600000 on 272000 → 244800; window 100 + configured 200 → 90."""
    _check_window(context_window)
    if configured is not None and configured < 0:
        raise ValueError("the configured auto-compact limit must be >= 0")
    if context_window is None:
        return configured
    ninety = context_window * 9 // 10
    return min(configured if configured is not None else ninety, ninety)


@dataclass(frozen=True)
class TokenStatus:
    """The result of the limit check (spec §2.3). `scope_limit` None means no limit (+∞)."""

    scope: Scope
    active_tokens: int
    scope_tokens: int
    scope_limit: int | None
    usable_window: int | None
    token_limit_reached: bool
    tokens_until_compaction: int | None


def token_status(
    *,
    active_tokens: int,
    context_window: int | None,
    effective_percent: int = DEFAULT_EFFECTIVE_PERCENT,
    configured_limit: int | None = None,
    scope: Scope | str = Scope.TOTAL,
    prefill: int | None = None,
) -> TokenStatus:
    """Codex's `context_window_token_status` (spec §2.3).

    total: scope tokens = active, limit = auto_compact_limit (clamped), reached when active >= limit; no
    usable-window cap. body_after_prefix: scope tokens = active − prefill (active itself when no prefill yet, so
    the first check counts 0), limit = the configured value as given (not clamped) else auto_compact_limit,
    reached when scope tokens >= limit or active >= usable window.
    """
    scope = Scope(scope)
    if active_tokens < 0:
        raise ValueError("active_tokens must be >= 0")
    usable = usable_window(context_window, effective_percent)
    if scope == Scope.TOTAL:
        limit = auto_compact_limit(context_window, configured_limit)
        reached = limit is not None and active_tokens >= limit
        until = None if limit is None else max(0, limit - active_tokens)
        return TokenStatus(scope, active_tokens, active_tokens, limit, usable, reached, until)

    baseline = prefill if prefill is not None else active_tokens
    body = active_tokens - baseline
    limit = configured_limit if configured_limit is not None else auto_compact_limit(context_window, None)
    reached = (limit is not None and body >= limit) or (usable is not None and active_tokens >= usable)
    candidates = []
    if limit is not None:
        candidates.append(limit - body)
    if usable is not None:
        candidates.append(usable - active_tokens)
    until = max(0, min(candidates)) if candidates else None
    return TokenStatus(scope, active_tokens, body, limit, usable, reached, until)


@dataclass(frozen=True)
class ModelLimits:
    """What the threshold checks need to know about one model (spec §2.2, §2.4.1a)."""

    slug: str
    context_window: int | None = DEFAULT_CONTEXT_WINDOW
    effective_percent: int = DEFAULT_EFFECTIVE_PERCENT
    configured_limit: int | None = None
    comp_hash: str | None = None

    @property
    def usable_window(self) -> int | None:
        return usable_window(self.context_window, self.effective_percent)

    @property
    def auto_compact_limit(self) -> int | None:
        return auto_compact_limit(self.context_window, self.configured_limit)


def too_big_for_model(active_tokens: int, new_model: ModelLimits, scope: Scope | str = Scope.TOTAL) -> bool:
    """The model-downshift size test (spec §2.4.1a): total scope `active > new limit` (strict) or
    `active >= new usable window`; body_after_prefix scope only `active >= new usable window`."""
    usable = new_model.usable_window
    over_window = usable is not None and active_tokens >= usable
    if Scope(scope) == Scope.BODY_AFTER_PREFIX:
        return over_window
    limit = new_model.auto_compact_limit
    return (limit is not None and active_tokens > limit) or over_window


def previous_model_reason(
    previous: ModelLimits | None, current: ModelLimits, active_tokens: int, scope: Scope | str = Scope.TOTAL
) -> Reason | None:
    """The pre-turn previous-model check (spec §2.4.1a): `comp_hash_changed` when both models declare a comp_hash
    and they differ; else `model_downshift` when the model changed to a smaller usable window and the history is
    too big for it; else None. Either reason compacts with the previous model."""
    if previous is None:
        return None
    if previous.comp_hash is not None and current.comp_hash is not None and previous.comp_hash != current.comp_hash:
        return Reason.COMP_HASH_CHANGED
    if previous.slug == current.slug:
        return None
    prev_usable, new_usable = previous.usable_window, current.usable_window
    if prev_usable is None or new_usable is None or prev_usable <= new_usable:
        return None
    return Reason.MODEL_DOWNSHIFT if too_big_for_model(active_tokens, current, scope) else None
