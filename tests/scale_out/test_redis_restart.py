"""Redis restarted while a session is written (issue 8): the websocket of a Daphne process closes instead of going
silently deaf, a page reconnecting after the restart is told the newest seq (so it re-syncs the lines written
while Redis was down) and then receives the next line live; no rollout line is lost or written twice.

The test runs its own redis-server on a free port (the machine's shared Redis is never restarted)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from compaction_app.engine.items import user_message
from sessions_app.models import LiveItem, RolloutLine
from sessions_app.services import do_append_items, verify_projection
from tests.scale_out.processes import child_env, free_port, start_daphne, stop
from tests.scale_out.test_worker_event_reaches_other_daphne import MARKER, covered_seqs, session_cookie

DEADLINE_SECONDS = 30
ITEMS = [user_message(text) for text in ("before", "while connected", "while redis is down", "after restart")]


def start_redis(port: int, workdir: Path) -> subprocess.Popen:
    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is not installed: the Redis-restart test starts its own")
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
         str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )
    import redis

    client = redis.Redis(port=port, socket_connect_timeout=0.2)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            client.ping()
            return process
        except redis.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process)
                raise RuntimeError(f"redis-server did not answer on port {port}") from None
            time.sleep(0.05)
        finally:
            client.close()


def open_session_socket(url: str, port: int, cookie: str):
    """Connect like the page does after a drop: retry until the web process answers (its first attempt after a
    Redis restart may still meet a stale pooled connection and fail with HTTP 500)."""
    from websockets.sync.client import connect

    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            return connect(url, origin=f"http://127.0.0.1:{port}", additional_headers={"Cookie": cookie},
                           open_timeout=10)
        except (InvalidStatus, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def next_batch(ws) -> range:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        seqs = covered_seqs(ws.recv(timeout=DEADLINE_SECONDS))
        if seqs:
            return seqs
    raise AssertionError("no batch arrived")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_after_a_redis_restart_the_page_reconnects_and_no_line_is_lost_or_duplicated(
    on_postgresql, redis_url, make_session, operator_user, settings, tmp_path
):
    redis_port, web_port = free_port(), free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}/0"
    # this process writes the session's lines (as a worker would) and publishes them through the restarted Redis
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [own_redis]}}}
    session = make_session(items=[ITEMS[0]])
    cookie = session_cookie(operator_user)
    url = f"ws://127.0.0.1:{web_port}/ws/sessions/{session.pk}/"
    redis_server = start_redis(redis_port, tmp_path)
    web = None
    try:
        web = start_daphne(port=web_port, env=child_env(redis_url=own_redis, broker_url=redis_url, var_dir=tmp_path),
                           log=tmp_path / "daphne.log")
        received: list[int] = []
        with open_session_socket(url, web_port, cookie) as ws:
            hello = MARKER.search(ws.recv(timeout=DEADLINE_SECONDS))
            assert hello and hello.groups()[:2] == ("hello", str(session.last_seq))
            page_seq = first_seq = int(hello.group(2))
            do_append_items(session=session, items=[ITEMS[1]])
            batch = next_batch(ws)
            assert batch.start == page_seq + 1
            received += list(batch)
            page_seq = batch[-1]

            stop(redis_server)
            # the write does not depend on Redis: the rollout in PostgreSQL is the record
            do_append_items(session=session, items=[ITEMS[2]])
            with pytest.raises(ConnectionClosed):  # the page learns it is disconnected
                while True:
                    ws.recv(timeout=DEADLINE_SECONDS)
        redis_server = start_redis(redis_port, tmp_path)

        with open_session_socket(url, web_port, cookie) as ws:
            hello = MARKER.search(ws.recv(timeout=DEADLINE_SECONDS))
            assert hello and hello.group(1) == "hello"
            # the page sees it is behind and re-syncs (page_seq, hello] over HTTP, as static/js/live.js does
            resynced = list(range(page_seq + 1, int(hello.group(2)) + 1))
            assert resynced, "the line written while Redis was down is not behind the reconnected page"
            received += resynced
            do_append_items(session=session, items=[ITEMS[3]])
            batch = next_batch(ws)
            assert batch.start == int(hello.group(2)) + 1
            received += list(batch)
    finally:
        if web is not None:
            stop(web)
        stop(redis_server)

    session.refresh_from_db()
    lines = list(RolloutLine.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert received == [seq for seq in lines if seq > first_seq]  # every line after the page loaded, once each
    assert lines == list(range(lines[0], lines[0] + len(lines)))
    assert list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True)) == ITEMS
    assert verify_projection(session=session) == []
