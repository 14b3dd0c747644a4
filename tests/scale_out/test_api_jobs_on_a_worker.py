"""With a broker, an API compaction runs on a Celery worker, not in the web process (issue 15): POST .../compact
answers 202 with a job, the worker runs it (its log shows the job task), polling the job gives the compaction, a
page watching the session sees the progress and the compacted line live, and a caller that asks to wait gets the
job too (a request never waits for another process). One Daphne and one worker on a private redis-server; about 20 s."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction
from compactweb.api_tokens import issue_token
from sessions_app.models import Job, RolloutLine
from tests.scale_out.processes import child_env, free_port, start_daphne, start_worker, stop, wait_for_log
from tests.scale_out.test_redis_restart import start_redis
from tests.scale_out.test_worker_event_reaches_other_daphne import MARKER, covered_seqs, session_cookie

DEADLINE_SECONDS = 60
JOB_TASK = "sessions_app.jobs.tasks.run_job"


def api(base: str, token: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(
        base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE_SECONDS) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_with_a_broker_an_api_compaction_is_a_job_a_worker_runs(on_postgresql, make_session, operator_user,
                                                                 tmp_path):
    from websockets.sync.client import connect

    session = make_session(items=[user_message("collect the deploy logs"), user_message("find the failing step")])
    token = issue_token(user=operator_user)
    redis_port, port = free_port(), free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    env = child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path)
    base = f"http://127.0.0.1:{port}"
    logs = {name: tmp_path / f"{name}.log" for name in ("daphne", "worker")}
    redis_server = start_redis(redis_port, tmp_path)
    web = worker = None
    try:
        web = start_daphne(port=port, env=env, log=logs["daphne"])
        worker = start_worker(queue="celery", env=env, log=logs["worker"])  # the default queue the API sends to
        wait_for_log(worker, logs["worker"], "ready")
        with connect(f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/", origin=base,
                     additional_headers={"Cookie": session_cookie(operator_user)}, open_timeout=30) as ws:
            assert MARKER.search(ws.recv(timeout=30)).group(1) == "hello"

            status, body, headers = api(base, token, "POST", f"/api/v1/sessions/{session.pk}/compact",
                                        {"strategy": "local"})
            assert status == 202, body
            job = body["job"]
            assert headers["Location"] == job["url"] and job["status"] == "queued"

            kinds, received, compacted = set(), set(), None
            deadline = time.monotonic() + DEADLINE_SECONDS
            while compacted is None or compacted not in received:
                assert time.monotonic() < deadline, f"no compacted line reached the page:\n{tails(logs)}"
                try:
                    message = ws.recv(timeout=1)
                except TimeoutError:
                    message = ""
                if 'data-live-marker="transient"' in message:
                    kinds.add("transient")
                received.update(covered_seqs(message))
                compacted = RolloutLine.objects.filter(session=session, kind="compacted").values_list(
                    "seq", flat=True).first()
            assert "transient" in kinds  # progress (job and compaction events) reached the page before the line

        while (polled := api(base, token, "GET", job["url"])[1])["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, polled
            time.sleep(0.2)
        first = Compaction.objects.get(session=session)
        assert (polled["status"], polled["http_status"], polled["result"]) == (
            "succeeded", 201, {"compaction": first.pk})

        # asking to wait changes nothing where a worker runs the job: the request never waits for another process
        status, body, _ = api(base, token, "POST", f"/api/v1/sessions/{session.pk}/compact?wait=true",
                              {"strategy": "local"})
        assert status == 202, body
        while (polled := api(base, token, "GET", body["job"]["url"])[1])["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, polled
            time.sleep(0.2)
        assert polled["result"] == {"compaction": Compaction.objects.exclude(pk=first.pk).get(session=session).pk}
    finally:
        for process in (worker, web, redis_server):
            if process is not None:
                stop(process)

    worker_log = logs["worker"].read_text()
    assert worker_log.count(f"Task {JOB_TASK}[") >= 2 and "succeeded" in worker_log  # the worker ran both
    assert JOB_TASK not in logs["daphne"].read_text()
    assert list(Job.objects.values_list("status", flat=True)) == ["succeeded", "succeeded"]


def tails(logs) -> str:
    return "\n".join(f"--- {name}\n{log.read_text()[-2000:]}" for name, log in logs.items() if log.exists())
