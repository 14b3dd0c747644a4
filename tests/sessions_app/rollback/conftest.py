"""Helpers for rollback tests: compactions through the real compaction service (embedded simulated provider),
turns of items, and the observable state of a session."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest


@pytest.fixture(autouse=True)
def _no_engine_sleeps(monkeypatch):
    from compaction_app import services

    async def sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(services, "engine_sleep", sleep)


@pytest.fixture
def compact() -> Callable:
    """compact(session, strategy="remote_v1") → the Compaction installed by compaction_app.services."""
    from compaction_app.services import do_compact_session

    def run(session, strategy: str = "remote_v1"):
        compaction = do_compact_session(session_id=session.pk, strategy=strategy)
        session.refresh_from_db()
        return compaction

    return run


@pytest.fixture
def add_turn(items_factory) -> Callable:
    """add_turn(session, n) → appends a user message and an assistant reply (the model's output)."""
    from sessions_app.services import do_append_items

    def add(session, n: int, size: int = 30):
        do_append_items(
            session=session,
            items=[items_factory.user(f"request {n} " + "word " * size), items_factory.assistant(f"answer {n} " + "ok " * size)],
        )
        session.refresh_from_db()

    return add


def as_json(items) -> str:
    """Equal text means equal item for item and byte for byte."""
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"))


@pytest.fixture
def rollout_rows() -> Callable:
    """rollout_rows(session) → every rollout line as (seq, kind, payload)."""
    from sessions_app.models import RolloutLine

    def rows(session) -> list[tuple]:
        return list(RolloutLine.objects.filter(session=session).order_by("seq").values_list("seq", "kind", "payload"))

    return rows


@pytest.fixture
def busy():
    """busy(session, purpose) → a context manager holding the session's lease, as a running compaction does."""
    from sessions_app.locks import session_lease

    def hold(session, purpose: str = "compaction"):
        return session_lease(session_id=session.pk, purpose=purpose)

    return hold
