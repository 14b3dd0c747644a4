"""Helpers for the compaction service tests: fast sleeps, a served scripted provider, and the full observable state
of a session (cached history, rebuild from the rollout, header fields) to prove failures change nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.fakes.sleeps import SleepRecorder


@pytest.fixture(autouse=True)
def _no_backoff(no_engine_sleeps):
    """Retried failures wait no real time (tests/conftest.py)."""


@pytest.fixture
def recorded_sleeps() -> SleepRecorder:
    """Pass as `do_compact_session(..., sleep=recorded_sleeps)`; it holds the backoffs the service waited."""
    return SleepRecorder()


@pytest.fixture
def observable_state() -> Callable:
    """observable_state(session) → everything a failure must leave unchanged."""
    from sessions_app.models import LiveItem, Session
    from sessions_app.rollout.services import project_rollout

    def state(session) -> dict:
        fresh = Session.objects.get(pk=session.pk)
        projection = project_rollout(session=fresh)
        header = fresh.header
        return {
            "live": list(LiveItem.objects.filter(session=fresh).order_by("position").values_list("item", "tokens")),
            "rebuilt": [(e.item, e.tokens) for e in projection.entries],
            "window": (fresh.window_number, fresh.window_id, fresh.previous_window_id, fresh.first_window_id),
            "meter": header.meter,
            "compaction_count": fresh.compaction_count,
            "reference_context_set": fresh.reference_context_set,
            "tokens_in_window": fresh.tokens_in_window,
        }

    return state
