"""Redis restarted while sessions run (issue 8): the dashboard reconnects, no rollout line is lost or duplicated.

The set is the scale-out one (scripts/scale-out) on a private redis-server (a free port; the machine's shared Redis
is never restarted), which is both the channel layer and the Celery broker: one Daphne process, one Celery worker
(prefork), and the simulator scheduler (`manage.py simulate --scheduler`) sending the steps of a small looping
fleet to the worker. Two pages watch two of the sessions over the websocket and keep their seq the way
static/js/live.js does (hello, gap, HTTP re-sync). Redis is stopped mid-run and started again on the same port; the
worker and the scheduler must reconnect by themselves, each page must see its socket close, reconnect, re-sync what
it missed and then follow the worker's new lines live again. A second test pins down the worker surviving a restart
while it is busy with a task."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from celery import Celery
from websockets.exceptions import ConnectionClosed, InvalidStatus

from compaction_app.engine.items import user_message
from compaction_app.models import CompactionAttempt
from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.rollout.services import verify_projection
from tests.scale_out.checks import assert_fault_run_clean, database_deadlocks, logs_under
from tests.scale_out.processes import (
    child_env,
    free_port,
    send_compaction_job,
    start_daphne,
    start_scheduler,
    start_worker,
    stop,
    wait_for_log,
)
from tests.scale_out.test_worker_event_reaches_other_daphne import MARKER, session_cookie

FLEET_SIZE = 3
TURNS_PER_MINUTE = 60  # per session: a steady stream of steps the two cores keep up with
DOWN_SECONDS = 2.0
STEPS_BEFORE = 2
BATCHES_BEFORE = 3
BATCHES_AFTER = 3
# Every wait below is for a condition (a log line, a hello, new steps in the database, a closed socket); this bound
# only keeps a broken run from hanging. It is not a speed: on a saturated host (the whole suite beside other runs)
# a reconnect after the restart took longer than the 30 s this used to be, and the test failed although nothing
# was wrong (issue 33, item 9).
DEADLINE_SECONDS = 240
STEP_TASK = "sessions_app.fleet.tasks.run_simulator_step"
SLOW_SECONDS = 5  # the simulated model's answer: the worker is mid-task for the whole outage
TRY_AGAIN = 4013  # sessions_app.live.consumers.CLOSE_TRY_AGAIN, as the browser sees it


def healthz(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=DEADLINE_SECONDS) as response:
            return response.status, json.loads(response.read())["checks"]
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["checks"]


def start_redis(port: int, workdir: Path) -> subprocess.Popen:
    """A private redis-server with Redis's default persistence: a graceful stop (SIGTERM, what a service manager's
    restart sends) saves the data set, which the restarted server loads, as an ordinary Redis restart does."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is not installed: the Redis-restart test starts its own")
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
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


@dataclass
class Connection:
    hello: int
    batches: list[range] = field(default_factory=list)


@dataclass
class Page:
    """The session page as static/js/live.js keeps it: `seq` is the newest line it shows. A hello that differs,
    a batch that does not start right after `seq`, or a server's resync marker make it fetch its live region over
    HTTP (the answer's marker is the seq it now shows); a batch it already shows is ignored."""

    base: str
    cookie: str
    session_id: int
    seq: int = 0
    first_seq: int = 0
    shown: Counter = field(default_factory=Counter)  # seq -> how many times it reached the page
    resyncs: list[str] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    failed_attempts: list[str] = field(default_factory=list)

    def _get(self, path: str) -> int:
        request = urllib.request.Request(self.base + path, headers={"Cookie": self.cookie})
        with urllib.request.urlopen(request, timeout=DEADLINE_SECONDS) as response:
            found = MARKER.search(response.read().decode())
        assert found, f"no seq marker in {path}"
        return int(found.group(2))

    @property
    def ws_url(self) -> str:
        return self.base.replace("http://", "ws://", 1) + f"/ws/sessions/{self.session_id}/"

    def load(self) -> None:
        self.seq = self.first_seq = self._get(f"/sessions/{self.session_id}/")

    def resync(self, reason: str) -> None:
        upto = self._get(f"/sessions/{self.session_id}/live/")
        assert upto >= self.seq, f"a re-sync went back from {self.seq} to {upto}"
        self.shown.update(range(self.seq + 1, upto + 1))
        self.seq = upto
        self.resyncs.append(reason)

    def receive(self, message: str) -> None:
        found = MARKER.search(message)
        if found is None:
            return
        kind, seq, start = found.group(1), int(found.group(2)), found.group(3)
        if kind == "hello":
            self.connections.append(Connection(hello=seq))
            if seq != self.seq:
                self.resync("hello")
        elif kind == "resync":
            self.resync("server")
        elif kind == "batch" and start is not None:
            self.connections[-1].batches.append(range(int(start), seq + 1))
            if seq <= self.seq:
                return
            if int(start) != self.seq + 1:
                self.resync("gap")
                return
            self.shown.update(range(int(start), seq + 1))
            self.seq = seq


def open_socket(page: Page):
    from websockets.sync.client import connect

    return connect(page.ws_url, origin=page.base, additional_headers={"Cookie": page.cookie},
                   open_timeout=DEADLINE_SECONDS)


def reconnect(page: Page):
    """Reconnect like the page: retry until a connection says hello (while the web process cannot reach Redis
    the handshake fails, or the socket closes before the hello)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        ws = None
        try:
            ws = open_socket(page).__enter__()  # the caller's `with` closes it
            page.receive(ws.recv(timeout=DEADLINE_SECONDS))
            return ws
        except (InvalidStatus, OSError, ConnectionClosed) as exc:
            page.failed_attempts.append(repr(exc))
            if ws is not None:
                ws.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def read_until(ws, page: Page, done, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not done():
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out waiting for {what}")
        try:
            page.receive(ws.recv(timeout=min(left, 1.0)))
        except TimeoutError:
            pass


def wait_until(done, what: str, timeout: float = DEADLINE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def every_session_stepped(session_ids, steps: int) -> bool:
    return not SimulatorRun.objects.filter(session_id__in=session_ids, steps_done__lt=steps).exists()


def steps_between(session_ids, start: datetime | None, end: datetime | None) -> int:
    """Turns the simulator started in the sessions between two instants (a turn starts with its turn_context)."""
    lines = RolloutLine.objects.filter(session_id__in=session_ids, kind="turn_context", payload__has_key="step")
    if start is not None:
        lines = lines.filter(timestamp__gt=start)
    if end is not None:
        lines = lines.filter(timestamp__lt=end)
    return lines.count()


def now() -> datetime:
    return datetime.now(tz=UTC)


@pytest.mark.services
@pytest.mark.timeout(900)  # a bound for a broken run only: see DEADLINE_SECONDS
@pytest.mark.django_db(transaction=True)
def test_after_a_redis_restart_the_page_reconnects_and_no_line_is_lost_or_duplicated(
    on_postgresql, provider, policy, operator_user, tmp_path
):
    redis_port, web_port = free_port(), free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}/0"
    env = child_env(redis_url=own_redis, broker_url=own_redis, var_dir=tmp_path)
    deadlocks_before = database_deadlocks()
    runs = fleet.do_start_fleet(scenario="many-short-turns", count=FLEET_SIZE, provider=provider, policy=policy,
                                turns_per_minute=TURNS_PER_MINUTE, loop=True, seed=7)
    session_ids = [run.session_id for run in runs]
    origin = f"http://127.0.0.1:{web_port}"
    cookie = session_cookie(operator_user)
    # Two pages: `patient` reconnects once the worker has written past it (a long reconnect backoff), so it must
    # re-sync; `eager` reconnects the moment Redis is back, on the web process's pooled connections to the old
    # server.
    patient, eager = (Page(base=origin, cookie=cookie, session_id=session_id) for session_id in session_ids[:2])
    logs = {name: tmp_path / f"{name}.log" for name in ("daphne", "worker", "scheduler")}
    redis_server = start_redis(redis_port, tmp_path)
    web = worker = scheduler = None
    try:
        web = start_daphne(port=web_port, env=env, log=logs["daphne"])
        # the scheduler sends to Celery's default queue: on this private Redis only this worker consumes it
        worker = start_worker(queue="celery", env=env, log=logs["worker"], pool="prefork", concurrency=2)
        wait_for_log(worker, logs["worker"], "ready", timeout=DEADLINE_SECONDS)
        for page in (patient, eager):
            page.load()
        sockets = [reconnect(page) for page in (patient, eager)]
        scheduler = start_scheduler(env=env, log=logs["scheduler"])
        with sockets[0], sockets[1]:
            read_until(sockets[0], patient, lambda: len(patient.connections[0].batches) >= BATCHES_BEFORE
                       and every_session_stepped(session_ids, STEPS_BEFORE),
                       f"{STEPS_BEFORE} steps of every session and {BATCHES_BEFORE} live batches before the "
                       f"restart\n{tails(logs)}")
            went_down = now()
            stop(redis_server)
            # each page learns it is disconnected: its socket closes instead of going silently deaf
            for ws, page in zip(sockets, (patient, eager), strict=True):
                with pytest.raises(ConnectionClosed):
                    read_until(ws, page, lambda: False, "the websocket to close after Redis stopped")
        # while Redis is down the web process cannot subscribe a page: it closes it with "try again later" ...
        with pytest.raises(ConnectionClosed) as refused_with, open_socket(eager) as refused:
            refused.recv(timeout=DEADLINE_SECONDS)
        assert refused_with.value.rcvd.code == TRY_AGAIN
        # ... and its /healthz says which dependencies are down (Redis is the channel layer and the broker here)
        status, checks = healthz(web_port)
        assert status == 503 and checks["database"] == "ok", checks
        assert checks["channel_layer"].startswith("failing") and checks["broker"].startswith("failing"), checks
        time.sleep(max(0.0, DOWN_SECONDS - (now() - went_down).total_seconds()))
        redis_server = start_redis(redis_port, tmp_path)
        came_back = now()
        sockets[1] = reconnect(eager)
        wait_until(lambda: all(steps_between([session_id], came_back, None) for session_id in session_ids),
                   f"the worker to run a step of every session after the restart\n{tails(logs)}")
        sockets[0] = reconnect(patient)
        with sockets[0], sockets[1]:
            for ws, page in zip(sockets, (patient, eager), strict=True):
                read_until(ws, page, lambda page=page: len(page.connections[-1].batches) >= BATCHES_AFTER,
                           f"{BATCHES_AFTER} live batches after the restart\n{tails(logs)}")
            fleet.do_stop_run()
            wait_until(lambda: not Session.objects.filter(pk__in=session_ids).exclude(lease_holder="").exists(),
                       "the steps in flight to finish")
            for ws, page in zip(sockets, (patient, eager), strict=True):
                last_seq = Session.objects.get(pk=page.session_id).last_seq
                read_until(ws, page, lambda page=page, last_seq=last_seq: page.seq >= last_seq,
                           f"the page of session {page.session_id} to show seq {last_seq}")
    finally:
        for process in (scheduler, worker, web, redis_server):
            if process is not None:
                stop(process)

    for page in (patient, eager):
        # Every line after the page loaded reached it exactly once, live or through a re-sync ...
        lines = list(RolloutLine.objects.filter(session_id=page.session_id).order_by("seq").values_list(
            "seq", flat=True))
        assert page.seq == lines[-1]
        assert sorted(page.shown.elements()) == [seq for seq in lines if seq > page.first_seq]
        # ... over one connection before the restart and one after (the reconnected one was not dropped again),
        # each streaming contiguous batches from its hello on: no line skipped or sent twice.
        assert len(page.connections) == 2, [c.hello for c in page.connections]
        for connection in page.connections:
            covered = [seq for batch in connection.batches for seq in batch]
            assert covered == list(range(connection.hello + 1, connection.hello + 1 + len(covered))), connection
    # The eager page was let in at its first attempt once Redis answered again.
    assert eager.failed_attempts == []
    # The patient page came back behind the worker, learnt it from the hello and re-synced.
    before, after = patient.connections
    assert after.hello > before.batches[-1][-1]
    assert "hello" in patient.resyncs

    # The rollouts: 0 lines lost or duplicated, every turn ended, no deadlock, no run failed.
    print(assert_fault_run_clean(session_ids, logs=logs_under(tmp_path), deadlocks_before=deadlocks_before))
    # The worker ran the steps, before Redis went down and after it came back.
    for session_id in session_ids:
        assert steps_between([session_id], None, went_down) > 0, f"session {session_id}: no step before"
        assert steps_between([session_id], came_back, None) > 0, f"session {session_id}: no step after"
    succeeded = re.findall(
        rf"Task {re.escape(STEP_TASK)}\[[-\w]+\] succeeded in [\d.]+s: 'ran'", logs["worker"].read_text()
    )
    assert len(succeeded) >= steps_between(session_ids, None, None)  # every turn was a step task on the worker


def tails(logs: dict[str, Path]) -> str:
    return "\n".join(f"--- {name}\n{log.read_text()[-2500:]}" for name, log in logs.items() if log.exists())


@pytest.mark.services
@pytest.mark.timeout(900)
@pytest.mark.django_db(transaction=True)
def test_a_worker_busy_with_a_task_when_redis_restarts_reconnects_instead_of_exiting(
    on_postgresql, make_session, tmp_path, monkeypatch
):
    """The deterministic case behind the fleet test's worker: one task running (acks_late, so unacknowledged) and
    a free pool slot (so a BRPOP pending) when Redis goes away. kombu 5.7 then crashed the worker with
    AttributeError ("Unrecoverable error"); compactweb.celery keeps it alive."""
    redis_port = free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}/0"
    env = child_env(redis_url=own_redis, broker_url=own_redis, var_dir=tmp_path)
    slow, quick = (make_session(items=[user_message(text), user_message("and then?")]) for text in ("one", "two"))
    Session.objects.filter(pk=slow.pk).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    log = tmp_path / "worker.log"
    # Celery prefers CELERY_BROKER_URL from the environment to the broker it is given: a run with it set would send
    # the jobs to that broker, which this worker never reads.
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    broker = Celery("compactweb-test", broker=own_redis, set_as_current=False)
    redis_server = start_redis(redis_port, tmp_path)
    worker = None
    try:
        worker = start_worker(queue="celery", env=env, log=log, pool="prefork", concurrency=2)
        wait_for_log(worker, log, "ready", timeout=DEADLINE_SECONDS)
        send_compaction_job(broker, session_id=slow.pk)
        wait_until(lambda: CompactionAttempt.objects.filter(session=slow, status="running").exists(),
                   f"the compaction to start\n{log.read_text()[-3000:]}")
        stop(redis_server)
        wait_for_log(worker, log, "Connection to broker lost", timeout=DEADLINE_SECONDS)
        time.sleep(DOWN_SECONDS)
        redis_server = start_redis(redis_port, tmp_path)
        wait_until(lambda: worker.poll() is not None or log.read_text().count("Connected to redis://") == 2,
                   f"the worker to reconnect\n{log.read_text()[-3000:]}")
        assert worker.poll() is None, f"the worker exited instead of reconnecting:\n{log.read_text()[-3000:]}"
        send_compaction_job(broker, session_id=quick.pk)
        wait_until(lambda: all(RolloutLine.objects.filter(session=s, kind="compacted").exists()
                               for s in (slow, quick)),
                   f"both compactions to finish\n{log.read_text()[-3000:]}")
        assert worker.poll() is None, log.read_text()[-3000:]
    finally:
        if worker is not None:
            stop(worker)
        stop(redis_server)
        broker.close()
    assert "Unrecoverable error" not in log.read_text()
    for session in (slow, quick):
        assert RolloutLine.objects.filter(session=session, kind="compacted").count() == 1
        assert verify_projection(session=Session.objects.get(pk=session.pk)) == []
