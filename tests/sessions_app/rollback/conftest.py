"""Helpers for rollback tests: compactions through the real compaction service (embedded simulated provider),
turns of items, and the observable state of a session."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest


@pytest.fixture(autouse=True)
def _no_engine_sleeps(no_engine_sleeps):
    """Engine retries never really sleep in these tests."""


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
    from sessions_app.rollout.lease import session_lease

    def hold(session, purpose: str = "compaction"):
        return session_lease(session_id=session.pk, purpose=purpose)

    return hold
