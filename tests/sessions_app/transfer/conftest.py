"""Helpers for export/import/replay tests: fixture rollouts, compactions through the real service, turns, and a
count of every row an import could write (to prove a refused import stored nothing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

ROLLOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"


@pytest.fixture(autouse=True)
def _no_engine_sleeps(no_engine_sleeps):
    """Engine retries never really sleep in these tests."""


@pytest.fixture
def rollout_bytes() -> Callable[[str], bytes]:
    return lambda name: (ROLLOUTS / name).read_bytes()


@pytest.fixture
def row_counts() -> Callable[[], dict]:
    """Every table an import writes to, counted."""
    from compaction_app.models import AuditEntry, Compaction
    from sessions_app.models import (
        CodexSource,
        CodexSourceLine,
        ContextWindow,
        LiveItem,
        RolloutLine,
        Session,
        StagedRolloutLine,
    )

    tables = (Session, RolloutLine, StagedRolloutLine, LiveItem, ContextWindow, Compaction, AuditEntry, CodexSource,
              CodexSourceLine)

    def counts() -> dict:
        return {m.__name__: m.objects.count() for m in tables}

    return counts
