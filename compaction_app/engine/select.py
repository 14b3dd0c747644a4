"""Which implementation runs a compaction (spec §2.5)."""

from __future__ import annotations

from compaction_app.engine.errors import CompactionConfigError
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.vocabulary import RemoteSupport, Strategy, StrategyPreference


def auto_strategy(settings: CompactionSettings) -> Strategy:
    """spec §2.5: token budget first; else a provider with remote compaction uses v2 when the v2 switch is on (and
    the provider offers v2), otherwise v1; else local summarization."""
    if settings.token_budget:
        return Strategy.TOKEN_BUDGET
    if settings.remote_compaction is not RemoteSupport.NONE:
        if settings.remote_compaction_v2 and settings.remote_compaction is RemoteSupport.V2:
            return Strategy.REMOTE_V2
        return Strategy.REMOTE_V1
    return Strategy.LOCAL


def select_strategy(settings: CompactionSettings, requested: str | None = None) -> Strategy:
    """The strategy for one compaction: an explicit request (manual compaction lets the operator choose) beats the
    policy's preference, which beats the automatic rule of spec §2.5. A remote strategy the provider does not offer
    is a CompactionConfigError."""
    choice = requested or (None if settings.strategy is StrategyPreference.AUTO else settings.strategy.value)
    if choice is None or choice == StrategyPreference.AUTO.value:
        return auto_strategy(settings)
    try:
        strategy = Strategy(choice)
    except ValueError:
        names = ", ".join(s.value for s in Strategy)
        raise CompactionConfigError(f"unknown compaction strategy {choice!r}; choose one of {names}") from None
    support = settings.remote_compaction
    if strategy is Strategy.REMOTE_V1 and support is RemoteSupport.NONE:
        raise CompactionConfigError(
            f"strategy remote_v1 needs a provider with remote compaction; {settings.model!r} has none"
        )
    if strategy is Strategy.REMOTE_V2 and support is not RemoteSupport.V2:
        raise CompactionConfigError(
            f"strategy remote_v2 needs a provider that supports remote compaction v2; this one supports "
            f"{support.value}"
        )
    return strategy
