"""A PostgreSQL outage under a running set (issue 31): 10 s, one longer than the lease TTL (issue 42: a step
interrupted past its TTL must not leave its session to wait out the two-minute claim), and 60 s (nightly: scripts/
nightly scale). The whole set resumes within RESUME_SECONDS of the database's return, by itself, and the fault
suite's checker (tests/scale_out/checks.py) finds 0 lines lost or duplicated, 0 turns without an end (a turn the
outage cut ends with an `error` line and `turn_complete`) and 0 deadlocks. One Daphne process, one Celery worker
and the simulator scheduler (with its heartbeat file, as scripts/scale-out runs it) reach the test database through
a TCP proxy (tests/scale_out/tcp_proxy.py); the test cuts it (every connection reset, new ones refused) while a
small looping fleet steps. During the outage the API answers JSON 503 in its error shape, a page's websocket
handshake is closed with 4013 (no HTTP 500), and the scheduler stops beating (no round reaches the database, so a
watchdog would judge it); once the proxy listens again every session steps again and nobody restarted anything.
About 40 s on an idle machine (the 60 s cut: about 90 s)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection

from sessions_app.fleet import runtime as fleet
from sessions_app.live.consumers import CLOSE_TRY_AGAIN
from sessions_app.models import Session
from tests.scale_out.checks import (
    assert_fault_run_clean,
    database_deadlocks,
    logs_under,
    seconds_until_each_steps,
    stepped_since,
)
from tests.scale_out.processes import (
    child_env,
    free_port,
    start_daphne,
    start_scheduler,
    start_worker,
    stop,
    wait_for_log,
)
from tests.scale_out.tcp_proxy import TcpProxy
from tests.scale_out.test_redis_restart import now, start_redis, wait_until
from tests.scale_out.test_worker_event_reaches_other_daphne import session_cookie

FLEET_SIZE = 2
TURNS_PER_MINUTE = 60
OUTAGE_SECONDS = 10
LONG_OUTAGE_SECONDS = 14
SHORT_TTL = 4  # seconds: the long outage is three and a half of them
NIGHTLY_OUTAGE_SECONDS = 60
RESUME_SECONDS = 15  # the goal: every session steps again this soon after the database returns
DEADLINE_SECONDS = 90  # per wait, for process starts on a loaded machine


def api_get(port: int, path: str, token: str) -> tuple[int, dict, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def handshake_close_code(port: int, session_id: int, cookie: str) -> int | None:
    """Open the session page's websocket; the close code it ends with (None: it stayed open). A handshake refused
    with an HTTP status raises InvalidStatus."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{port}/ws/sessions/{session_id}/", origin=f"http://127.0.0.1:{port}",
                 additional_headers={"Cookie": cookie}, open_timeout=30) as socket:
        try:
            socket.recv(timeout=30)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
    return None


def heartbeat_age(path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


@pytest.mark.services
@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("outage_seconds", "lease_ttl"), [
    pytest.param(OUTAGE_SECONDS, None, id="10s"),
    pytest.param(LONG_OUTAGE_SECONDS, SHORT_TTL, id="longer-than-the-lease-ttl"),
    # A minute, with the default TTL: scripts/nightly scale's (a minute more than CI's pass can spend).
    pytest.param(NIGHTLY_OUTAGE_SECONDS, None, id="60s", marks=pytest.mark.nightly),
])
def test_a_database_outage_of_any_length_stops_nothing_for_good(on_postgresql, provider, policy, operator_user,
                                                                tmp_path, outage_seconds, lease_ttl):
    from compactweb.api_tokens import issue_token

    token = issue_token(user=operator_user)
    cookie = session_cookie(operator_user)
    redis_port, web_port = free_port(), free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    db = connection.settings_dict
    proxy = TcpProxy(upstream_host=db["HOST"] or "127.0.0.1", upstream_port=int(db["PORT"] or 5432)).start()
    env = child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path)
    env["DATABASE_URL"] = env["DATABASE_URL"].replace(f":{db['PORT'] or 5432}/", f":{proxy.port}/")
    if lease_ttl is not None:
        env["COMPACTWEB_LEASE_TTL_SECONDS"] = str(lease_ttl)
    deadlocks_before = database_deadlocks()
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=FLEET_SIZE, provider=provider, policy=policy,
                                turns_per_minute=TURNS_PER_MINUTE, loop=True, seed=31)
    session_ids = [run.session_id for run in runs]
    beat = tmp_path / "scheduler.heartbeat"
    redis_server = start_redis(redis_port, tmp_path)
    processes = []
    try:
        processes.append(start_daphne(port=web_port, env=env, log=tmp_path / "daphne.log"))
        worker = start_worker(queue="celery", env=env, log=tmp_path / "worker.log", pool="prefork", concurrency=2)
        processes.append(worker)
        wait_for_log(worker, tmp_path / "worker.log", "ready", timeout=DEADLINE_SECONDS)
        processes.append(start_scheduler(env=env, log=tmp_path / "scheduler.log", heartbeat=beat))
        started = now()
        wait_until(lambda: all(stepped_since(s, started) for s in session_ids), "every session to step",
                   timeout=DEADLINE_SECONDS)
        assert api_get(web_port, "/api/v1/sessions", token)[0] == 200

        proxy.cut()
        cut_at = time.monotonic()
        time.sleep(2)
        status, headers, body = api_get(web_port, "/api/v1/sessions", token)
        assert status == 503, body
        assert body["error"]["code"] == "database_unavailable" and headers["Retry-After"] == "5"
        # a page's websocket is accepted and closed with "try again later", not refused with an HTTP 500
        assert handshake_close_code(web_port, session_ids[0], cookie) == CLOSE_TRY_AGAIN
        if lease_ttl is not None:
            # What the watchdog does to a scheduler that stops beating through a long outage: a new one, which
            # never heard of the steps the old one sent (issue 42: those sessions then waited out their claim).
            stop(processes.pop())
            processes.append(start_scheduler(env=env, log=tmp_path / "scheduler-2.log", heartbeat=beat))
            # The new scheduler must meet the outage. On a loaded host its Python start outlasted the 10 s left of
            # the cut (it then logged only its start, and the check after the run failed): the cut lasts until it
            # has met it, and a scheduler that never says so still fails here.
            wait_for_log(processes[-1], tmp_path / "scheduler-2.log", "the database does not answer",
                         timeout=DEADLINE_SECONDS)
        time.sleep(max(0.0, outage_seconds - (time.monotonic() - cut_at)))
        assert heartbeat_age(beat) > outage_seconds - 3  # no round reached the database: no beat
        proxy.restore()
        back_at, back_clock = now(), time.monotonic()

        resumed_after = seconds_until_each_steps(session_ids, since=back_at, since_clock=back_clock,
                                                 timeout=DEADLINE_SECONDS)
        print(f"every session stepped again {resumed_after:.1f} s after the database returned")
        assert resumed_after <= RESUME_SECONDS
        assert heartbeat_age(beat) < 5  # the scheduler beats again, without a restart
        assert api_get(web_port, "/api/v1/sessions", token)[0] == 200
        assert all(p.poll() is None for p in processes)  # nobody died (or was restarted, but the one scheduler)

        fleet.do_stop_run()
        wait_until(lambda: not Session.objects.filter(pk__in=session_ids).exclude(lease_holder="").exists(),
                   "the steps in flight to finish", timeout=DEADLINE_SECONDS)
    finally:
        for process in reversed(processes):
            stop(process)
        stop(redis_server)
        proxy.close()

    scheduler_log = (tmp_path / ("scheduler.log" if lease_ttl is None else "scheduler-2.log")).read_text()
    assert scheduler_log.count("the database does not answer") >= 1
    print(assert_fault_run_clean(session_ids, logs=logs_under(tmp_path), deadlocks_before=deadlocks_before,
                                 dump_to=tmp_path / "rollouts"))
