"""Fleet boards on two Daphne processes over the Redis channel layer (issue 34): each process is one member of the
fleet group however many boards it serves (its fleet hub), and a line written in another process reaches, on both,
the boards whose page holds its row and no other board."""

from __future__ import annotations

import re
import time
from contextlib import ExitStack

import pytest

from compaction_app.engine.items import user_message
from sessions_app.rollout.events import FLEET_GROUP
from sessions_app.rollout.services import do_append_items
from tests.scale_out.processes import child_env, free_port, start_daphne, stop
from tests.scale_out.test_worker_event_reaches_other_daphne import session_cookie

ROW = re.compile(r'<tr id="session-(\d+)"')
DEADLINE_SECONDS = 30
QUIET_SECONDS = 2.0


def rows_within(ws, seconds: float) -> list[str]:
    """The session ids of the rows a board received within `seconds`."""
    rows, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            rows += ROW.findall(ws.recv(timeout=0.2))
        except TimeoutError:
            continue
    return rows


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_boards_on_two_web_processes_share_one_fleet_member_each_and_get_only_their_rows(
    on_postgresql, redis_url, make_session, operator_user, tmp_path
):
    import redis
    from websockets.sync.client import connect

    shown = make_session(items=[user_message("on two of the boards")])
    elsewhere = make_session(items=[user_message("on the other two")])
    env = child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path)
    group = f"asgi:group:{FLEET_GROUP}"  # channels-redis's key of the group (its default prefix)
    client = redis.Redis.from_url(redis_url)
    before = set(client.zrange(group, 0, -1))
    cookie = session_cookie(operator_user)
    webs = []
    try:
        for i in range(2):
            port = free_port()
            webs.append((port, start_daphne(port=port, env=env, log=tmp_path / f"daphne-{i}.log")))
        with ExitStack() as stack:
            boards = [
                (rows, stack.enter_context(connect(
                    f"ws://127.0.0.1:{port}/ws/fleet/?rows={rows}", origin=f"http://127.0.0.1:{port}",
                    additional_headers={"Cookie": cookie}, open_timeout=30)))
                for port, _ in webs for rows in (shown.pk, elsewhere.pk)
            ]
            assert len(set(client.zrange(group, 0, -1)) - before) == 2  # one member per process, not per board

            do_append_items(session=shown, items=[user_message("a change")])  # published from this process

            for rows, ws in boards:
                if rows == shown.pk:
                    deadline = time.monotonic() + DEADLINE_SECONDS
                    while str(shown.pk) not in (got := rows_within(ws, 0.5)) and time.monotonic() < deadline:
                        pass
                    assert str(shown.pk) in got, f"the row never reached a board:\n{_tail(tmp_path)}"
            for rows, ws in boards:
                if rows == elsewhere.pk:
                    assert rows_within(ws, QUIET_SECONDS) == []  # the header counts at most, never a row
        deadline = time.monotonic() + DEADLINE_SECONDS
        while set(client.zrange(group, 0, -1)) - before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not set(client.zrange(group, 0, -1)) - before  # each process left the group with its last board
    finally:
        for _, process in webs:
            stop(process)


def _tail(tmp_path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(tmp_path.glob("daphne-*.log")))
