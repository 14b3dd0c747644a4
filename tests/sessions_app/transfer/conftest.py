"""Helpers for export/import/replay tests: fixture rollouts, compactions through the real service, turns, and a
count of every row an import could write (to prove a refused import stored nothing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

ROLLOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"


@pytest.fixture(autouse=True)
def _no_engine_sleeps(monkeypatch):
    from compaction_app import services

    async def sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(services, "engine_sleep", sleep)


@pytest.fixture
def rollout_bytes() -> Callable[[str], bytes]:
    return lambda name: (ROLLOUTS / name).read_bytes()


@pytest.fixture
def compact() -> Callable:
    from compaction_app.services import do_compact_session

    def run(session, strategy: str = "remote_v1"):
        compaction = do_compact_session(session_id=session.pk, strategy=strategy)
        session.refresh_from_db()
        return compaction

    return run


@pytest.fixture
def add_turn(items_factory) -> Callable:
    from sessions_app.services import do_append_items

    def add(session, n: int, size: int = 30):
        do_append_items(
            session=session,
            items=[items_factory.user(f"request {n} " + "word " * size), items_factory.assistant(f"answer {n} " + "ok " * size)],
        )
        session.refresh_from_db()

    return add


@pytest.fixture
def row_counts() -> Callable[[], dict]:
    """Every table an import writes to, counted."""
    from compaction_app.models import AuditEntry, Compaction
    from sessions_app.models import ContextWindow, LiveItem, RolloutLine, Session

    def counts() -> dict:
        return {m.__name__: m.objects.count() for m in (Session, RolloutLine, LiveItem, ContextWindow, Compaction, AuditEntry)}

    return counts
