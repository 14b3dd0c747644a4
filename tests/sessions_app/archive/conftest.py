"""Sessions made old enough for retention, an archive folder per test, and the export's bytes to compare with."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path):
    settings.COMPACTWEB_ARCHIVE_DIR = tmp_path / "archive"
    return settings.COMPACTWEB_ARCHIVE_DIR


@pytest.fixture(autouse=True)
def _no_engine_sleeps(no_engine_sleeps):
    """Compactions in these tests never really sleep."""


@pytest.fixture
def age() -> Callable:
    """age(session, days=40, state="stopped"): the session's last activity `days` ago (and its state)."""
    from sessions_app.models import Session

    def make_old(session, days: float = 40, state: str = Session.State.STOPPED):
        Session.objects.filter(pk=session.pk).update(
            updated_at=timezone.now() - timedelta(days=days), state=state
        )
        session.refresh_from_db()
        return session

    return make_old


@pytest.fixture
def export_bytes() -> Callable:
    from sessions_app.transfer.exporter import export_rollout

    return lambda session: "".join(export_rollout(session=session)).encode("utf-8")


@pytest.fixture
def ended_session(make_session, add_turn, compact, age):
    """A session with turns and a compaction, ended 40 days ago."""
    session = make_session(title="old work", base_instructions="Be brief.")
    add_turn(session, 1)
    add_turn(session, 2)
    compact(session)
    add_turn(session, 3)
    return age(session)
