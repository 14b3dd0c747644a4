"""A websocket on a Daphne process with the Redis channel layer stays connected while idle and still receives the
next event (issue 8). redis-py 8 defaults `socket_timeout` to 5 s, which aborts channels_redis's blocking receive
(BZPOPMIN, up to 5 s) and crashed every consumer idle for a few seconds (channels_redis issue #422); the settings
give the layer a read timeout longer than that blocking wait."""

from __future__ import annotations

import time

import pytest

from compaction_app.engine.items import user_message
from sessions_app.rollout.services import do_append_items
from tests.scale_out.processes import child_env, free_port, start_daphne, stop
from tests.scale_out.test_worker_event_reaches_other_daphne import MARKER, covered_seqs, session_cookie

# Longer than channels_redis's blocking receive (5 s) plus redis-py 8's default socket timeout (5 s).
IDLE_SECONDS = 12


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_an_idle_websocket_stays_connected_and_receives_the_next_line(
    on_postgresql, redis_url, make_session, operator_user, settings, tmp_path
):
    from websockets.sync.client import connect

    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis_url]}}}
    session = make_session(items=[user_message("watch this session")])
    port = free_port()
    web = start_daphne(port=port, env=child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path),
                       log=tmp_path / "daphne.log")
    try:
        with connect(f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/", origin=f"http://127.0.0.1:{port}",
                     additional_headers={"Cookie": session_cookie(operator_user)}, open_timeout=30) as ws:
            hello = MARKER.search(ws.recv(timeout=30))
            assert hello and hello.group(1) == "hello"
            with pytest.raises(TimeoutError):  # nothing to say while idle: the connection must simply stay open
                ws.recv(timeout=IDLE_SECONDS)
            do_append_items(session=session, items=[user_message("still there?")])
            session.refresh_from_db()
            deadline = time.monotonic() + 30
            received: set[int] = set()
            while session.last_seq not in received and time.monotonic() < deadline:
                received.update(covered_seqs(ws.recv(timeout=30)))
            assert session.last_seq in received
    finally:
        stop(web)
    assert "Exception inside application" not in (tmp_path / "daphne.log").read_text()
