"""Limits that follow from a provider and a policy together (what the admin, the meter and the API show)."""

from __future__ import annotations

from compaction_app.engine import thresholds
from compaction_app.engine.pins import pin_budget
from compaction_app.models import CompactionPolicy, Provider


def auto_compact_limit(*, provider: Provider, policy: CompactionPolicy) -> int:
    """The auto-compact limit shown next to the meter (spec §2.2, §2.3).

    total scope: min(configured or 90% of the window, 90% of the window); body_after_prefix: the configured value
    as given, else 90% of the window.
    """
    configured = policy.auto_compact_token_limit
    if policy.auto_compact_scope == CompactionPolicy.Scope.BODY_AFTER_PREFIX and configured is not None:
        return configured
    return thresholds.auto_compact_limit(provider.context_window, configured)


def session_pin_budget(*, provider: Provider, policy: CompactionPolicy) -> tuple[int, str]:
    """The pins' total token budget of a session's provider and policy, and where it comes from."""
    return pin_budget(usable_window=provider.usable_context_window, configured=policy.pin_budget_tokens)
