"""Pages stay live with a follower in another process on the embedded default (issue 30): the dashboard reads
the follower's writes from the database and publishes them on its in-memory channel layer."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions_app.models import Session
from sessions_app.rollout.events import FLEET_GROUP, session_group
from sessions_app.transfer import follow_live
from tests.scale_out.processes import database_env

ROLLOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"
LOCAL = (ROLLOUTS / "codex_0169_local_compaction.jsonl").read_bytes()
NAME = "rollout-2026-12-01T08-48-41-01a230ca-b869-7c02-b569-a052efd86504.jsonl"
ROOT = Path(__file__).resolve().parents[3]


def _follow_once(folder: Path, tmp: Path) -> None:
    """`manage.py follow_rollouts --once` in a process of its own, on this test's SQLite database."""
    # No REDIS_URL: the follower's own events stay in its process, as on the embedded default.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(COMPACTWEB_VAR_DIR=str(tmp), DJANGO_SETTINGS_MODULE="compactweb.settings", PYTHONPATH=str(ROOT))
    env.update(database_env())
    subprocess.run([sys.executable, "manage.py", "follow_rollouts", str(folder), "--once"], cwd=ROOT, env=env,
                   check=True, capture_output=True, timeout=120)


def _receive(layer, channel, condition, limit: float = 20.0) -> list[dict]:
    received: list[dict] = []

    async def until() -> None:
        import asyncio

        deadline = time.monotonic() + limit
        while not condition(received):
            if time.monotonic() > deadline:
                raise AssertionError(f"no live event for the follower's writes; got {received}")
            try:
                received.append(await asyncio.wait_for(layer.receive(channel), timeout=0.2))
            except TimeoutError:
                pass

    async_to_sync(until)()
    return received


@pytest.mark.django_db(transaction=True)
def test_a_follower_in_another_process_makes_the_fleet_board_and_session_page_live(tmp_path, provider, policy):
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    lines = LOCAL.splitlines(keepends=True)
    (day / NAME).write_bytes(b"".join(lines[:60]))
    layer = get_channel_layer()
    fleet = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(FLEET_GROUP, fleet)
    stop = threading.Event()
    writes = follow_live.FollowedWrites()
    writes.poll()  # the dashboard's first look, before the follower wrote anything
    watcher = threading.Thread(target=follow_live.watch, args=(stop,), kwargs={"poll_seconds": 0.1, "writes": writes},
                               daemon=True)
    watcher.start()
    try:
        _follow_once(day.parents[2], tmp_path)
        session = Session.objects.get()
        imported = _receive(layer, fleet, lambda got: any(e.get("session_id") == session.pk for e in got))
        assert imported[-1]["summary"]["last_seq"] == session.last_seq and imported[-1]["kind"] == "rollout.lines"
        page = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(session_group(session.pk), page)
        with (day / NAME).open("ab") as fh:
            fh.write(b"".join(lines[60:]))
        _follow_once(day.parents[2], tmp_path)
        session.refresh_from_db()
        (event,) = _receive(layer, page, lambda got: bool(got))
        assert event["seq"] == session.last_seq and event["first_seq"] > imported[-1]["seq"]
        assert event["summary"]["compaction_count"] == session.compaction_count == 1
    finally:
        stop.set()
        watcher.join(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_the_poll_publishes_only_what_moved(tmp_path, provider, policy, monkeypatch):
    from sessions_app.rollout import events
    from sessions_app.transfer.follow import sync_file

    path = tmp_path / NAME
    lines = LOCAL.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:60]))
    writes = follow_live.FollowedWrites()
    assert writes.poll() == []
    with monkeypatch.context() as here:
        here.setattr(events, "publish", lambda publication: None)  # as in another process: no events here
        session_id = sync_file(path=path).session_id
        assert writes.poll() == [session_id]
        assert writes.poll() == []  # nothing moved since
        with path.open("ab") as fh:
            fh.write(b"".join(lines[60:]))
        sync_file(path=path)
    assert writes.poll() == [session_id]
    assert writes.poll() == []


def test_the_watcher_starts_with_the_first_page_socket_not_when_the_application_is_imported(settings, monkeypatch):
    import asyncio

    import compactweb.asgi  # noqa: F401  (importing the application starts nothing)

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr(follow_live, "_started", None)
    reached = []

    async def page_socket(scope, receive, send):
        reached.append(scope["type"])

    app = follow_live.StartOnFirstSocket(page_socket)
    assert follow_live._started is None
    asyncio.run(app({"type": "websocket", "path": "/ws/fleet/"}, None, None))
    stop = follow_live._started
    try:
        assert reached == ["websocket"] and stop is not None
        assert any(t.name == "compactweb-followed-writes" for t in threading.enumerate())
        asyncio.run(app({"type": "websocket", "path": "/ws/fleet/"}, None, None))
        assert follow_live._started is stop  # one watcher per process
    finally:
        stop.set()
