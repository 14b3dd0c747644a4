"""A line written by a Celery worker reaches a websocket client connected to a different Daphne process (issue 8):
worker → PostgreSQL + the Redis channel layer → the Daphne process holding the websocket → the operator's page."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from celery import Celery
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore

from compaction_app.engine.items import user_message
from sessions_app.models import RolloutLine
from tests.scale_out.processes import (
    RUN_JOB_TASK,
    child_env,
    forget_queue,
    free_port,
    send_compaction_job,
    start_daphne,
    start_worker,
    stop,
    wait_for_log,
)

MARKER = re.compile(r'<div id="live-seq" hidden data-live-marker="(\w+)" data-seq="(\d+)"(?: data-from="(\d+)")?')
DEADLINE_SECONDS = 60


def session_cookie(user) -> str:
    """A logged-in Django session for `user`, stored in the shared database (what the login form would create)."""
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return f"{settings.SESSION_COOKIE_NAME}={store.session_key}"


def covered_seqs(message: str) -> range:
    """The rollout seqs a batch message carries (empty for the hello and transient progress)."""
    found = MARKER.search(message)
    if not found or found.group(1) != "batch" or found.group(3) is None:
        return range(0)
    return range(int(found.group(3)), int(found.group(2)) + 1)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_line_written_by_a_celery_worker_reaches_a_websocket_on_another_daphne_process(
    on_postgresql, redis_url, make_session, operator_user, tmp_path
):
    import redis
    from websockets.sync.client import connect

    session = make_session(items=[user_message("draft the migration plan"), user_message("list the risks")])
    queue = f"compactweb-test-{uuid.uuid4().hex[:8]}"
    env = child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path)
    port = free_port()
    broker = Celery("compactweb-test", broker=redis_url, set_as_current=False)
    web = worker = None
    try:
        web = start_daphne(port=port, env=env, log=tmp_path / "daphne.log")
        worker = start_worker(queue=queue, env=env, log=tmp_path / "worker.log")
        wait_for_log(worker, tmp_path / "worker.log", "ready")
        with connect(
            f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/", origin=f"http://127.0.0.1:{port}",
            additional_headers={"Cookie": session_cookie(operator_user)}, open_timeout=30,
        ) as ws:
            hello = MARKER.search(ws.recv(timeout=30))
            assert hello and hello.group(1) == "hello" and int(hello.group(2)) == session.last_seq
            send_compaction_job(broker, session_id=session.pk, queue=queue)
            deadline = time.monotonic() + DEADLINE_SECONDS
            received: set[int] = set()
            compacted_seq = None
            while time.monotonic() < deadline:
                try:
                    received.update(covered_seqs(ws.recv(timeout=1)))
                except TimeoutError:
                    pass
                if compacted_seq is None:
                    compacted_seq = RolloutLine.objects.filter(session=session, kind="compacted").values_list(
                        "seq", flat=True).first()
                if compacted_seq is not None and compacted_seq in received:
                    break
            assert compacted_seq is not None, f"the worker wrote no compacted line:\n{_tail(tmp_path)}"
            assert compacted_seq in received, (
                f"seq {compacted_seq} never reached the websocket (got {sorted(received)}):\n{_tail(tmp_path)}")
        assert RUN_JOB_TASK in (tmp_path / "worker.log").read_text()
    finally:
        for process in (worker, web):
            if process is not None:
                stop(process)
        forget_queue(redis.Redis.from_url(redis_url), queue)
        broker.close()


def _tail(tmp_path) -> str:
    return "\n".join(f"--- {name}\n{(tmp_path / name).read_text()[-2000:]}" for name in ("worker.log", "daphne.log"))
