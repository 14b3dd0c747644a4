"""A killed web process leaves no subscriber behind for longer than the channel layer's group expiry (issue 15): its
consumers never ran their disconnect, so their channels stay in the session's group only until their last
membership refresh expires. While the process lives, a page idle longer than the expiry stays subscribed (the
consumer re-joins every third of it). The expiry is 3 s here (CHANNEL_GROUP_EXPIRY); about 15 s."""

from __future__ import annotations

import signal
import time

import pytest

from compaction_app.engine.items import user_message
from tests.scale_out.processes import child_env, free_port, start_daphne, stop
from tests.scale_out.test_worker_event_reaches_other_daphne import MARKER, session_cookie

GROUP_EXPIRY = 3
DEADLINE_SECONDS = 30


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_killed_web_process_leaves_no_subscriber_beyond_the_group_expiry(
    on_postgresql, redis_url, make_session, operator_user, tmp_path
):
    import redis
    from websockets.sync.client import connect

    session = make_session(items=[user_message("watch me")])
    client = redis.Redis.from_url(redis_url)
    group = f"asgi:group:session.{session.pk}"
    client.delete(group)
    port = free_port()
    env = {**child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path),
           "CHANNEL_GROUP_EXPIRY": str(GROUP_EXPIRY)}
    web = start_daphne(port=port, env=env, log=tmp_path / "daphne.log")
    try:
        with connect(f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/", origin=f"http://127.0.0.1:{port}",
                     additional_headers={"Cookie": session_cookie(operator_user)}, open_timeout=30) as ws:
            assert MARKER.search(ws.recv(timeout=30)).group(1) == "hello"
            assert client.zcard(group) == 1

            time.sleep(2 * GROUP_EXPIRY)  # idle for longer than the expiry: the live page refreshed its membership
            assert client.zcount(group, time.time() - GROUP_EXPIRY, "+inf") == 1

            web.send_signal(signal.SIGKILL)
            web.wait(timeout=10)
            killed_at = time.monotonic()
            assert client.exists(group)  # no disconnect ran: the dead channel is still a member ...
            assert 0 < client.ttl(group) <= GROUP_EXPIRY  # ... for at most the expiry, which nothing refreshes now
            while client.exists(group):
                # ... until its last refresh expires: the group's key lapses with it
                assert time.monotonic() - killed_at < DEADLINE_SECONDS, client.zrange(group, 0, -1, withscores=True)
                time.sleep(0.2)
    finally:
        stop(web, sig=signal.SIGKILL)
        client.delete(group)
        client.close()
