"""Fixtures shared by the rollback and transfer tests: compactions through the real compaction service (embedded
simulated provider, no engine sleeps) and turns of plain items."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture
def compact(no_engine_sleeps) -> Callable:
    """compact(session, strategy="remote_v1") → the Compaction installed by sessions_app.compactions.services."""
    from sessions_app.compactions.services import do_compact_session

    def run(session, strategy: str = "remote_v1"):
        compaction = do_compact_session(session_id=session.pk, strategy=strategy)
        session.refresh_from_db()
        return compaction

    return run


@pytest.fixture
def add_turn(items_factory) -> Callable:
    """add_turn(session, n) → appends a user message and an assistant reply (the model's output)."""
    from sessions_app.rollout.services import do_append_items

    def add(session, n: int, size: int = 30):
        do_append_items(
            session=session,
            items=[items_factory.user(f"request {n} " + "word " * size), items_factory.assistant(f"answer {n} " + "ok " * size)],
        )
        session.refresh_from_db()

    return add


@pytest.fixture
def with_workers(monkeypatch):
    """Jobs go to "workers": Celery tasks, eager in the tests (they run in the test's thread and transaction)."""
    from compactweb import background
    from compactweb.celery import app

    app.set_current()  # tasks resolve through the current app: compactweb's, eager in the tests
    monkeypatch.setattr(background, "uses_broker", lambda: True)
