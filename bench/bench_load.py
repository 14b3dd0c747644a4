"""Scale-out load: a fleet of simulated sessions run by Celery workers, watched over websockets on several Daphne
processes, all on PostgreSQL + Redis (issue 8). Run by hand, not in CI:

    DATABASE_URL=postgres://USER@HOST:5432/compactweb_bench REDIS_URL=redis://HOST:6379/4 \
    CELERY_BROKER_URL=redis://HOST:6379/5 .venv/bin/python bench/bench_load.py \
        [--sessions 100] [--watchers 50] [--web 2] [--workers 2] [--seconds 60] [--scenario many-short-turns] [--context-window N]

Use a database and Redis numbers of their own: the benchmark migrates the database and leaves its sessions there.
It starts the web processes (Daphne), the workers (`celery worker --pool prefork --concurrency 2`) and one
scheduler as subprocesses, starts the fleet (looping scenarios, as fast as possible), connects the watchers
(watcher i watches session i mod N through web process i mod W, logged in with a session cookie), runs for
`--seconds`, stops the scheduler, lets the workers finish and the events arrive, then prints:

- turns per second and compactions per minute (simulator steps and Compaction rows made while the scheduler ran);
- event latency p50 / p99: from a rollout line's timestamp (taken by the writing worker just before its commit)
  to the moment a watcher receives the websocket message carrying that seq;
- dropped events: seqs a watcher never received in a batch (a gap between batches, or lines written before the end
  that never arrived) — must be 0;
- database growth per 1,000 turns (pg_database_size before and after, over every turn run, including the ones
  still queued when the scheduler stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r'data-live-marker="(\w+)" data-seq="(\d+)"(?: data-from="(\d+)")?')
SETTLE_SECONDS = 3.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a web process exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"no web process on port {port} after {timeout:g}s")


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class Watcher:
    """One browser-like client of ws/sessions/<id>/: which seqs arrived when, and the gaps between batches."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.first_seq: int | None = None
        self.last_seq = 0
        self.arrivals: dict[int, float] = {}
        self.dropped = 0

    def take(self, html: str, now: float) -> None:
        found = MARKER.search(html)
        if not found:
            return
        kind, seq, start = found.group(1), int(found.group(2)), found.group(3)
        if kind == "hello":
            self.first_seq = self.last_seq = seq
            return
        if kind != "batch" or start is None:
            return
        start = int(start)
        if start > self.last_seq + 1:
            self.dropped += start - self.last_seq - 1
        for covered in range(max(start, self.last_seq + 1), seq + 1):
            self.arrivals[covered] = now
        self.last_seq = max(self.last_seq, seq)


async def _watch(url: str, origin: str, cookie: str, watcher: Watcher, stop: asyncio.Event) -> None:
    import websockets

    for attempt in range(20):  # a web process under start-up load may drop the first handshakes
        try:
            ws = await websockets.connect(url, origin=origin, additional_headers={"Cookie": cookie}, max_size=None)
            break
        except (OSError, websockets.exceptions.InvalidHandshake, websockets.exceptions.InvalidMessage):
            if attempt == 19:
                raise
            await asyncio.sleep(0.5)
    async with ws:
        while not stop.is_set():
            try:
                html = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            watcher.take(html, time.time())


def _steps_done(run_ids: list[int]) -> int:
    from django.db.models import Sum

    from sessions_app.models import SimulatorRun

    return SimulatorRun.objects.filter(pk__in=run_ids).aggregate(n=Sum("steps_done"))["n"] or 0


def _db_size() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("select pg_database_size(current_database())")
        return cursor.fetchone()[0]


def _cookie(user) -> str:
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return f"{settings.SESSION_COOKIE_NAME}={store.session_key}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--web", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--scenario", default="many-short-turns")
    parser.add_argument("--context-window", type=int, default=None,
                        help="the simulated model's window (smaller: more compactions)")
    args = parser.parse_args()
    missing = [n for n in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL") if not os.environ.get(n)]
    if missing or not os.environ["DATABASE_URL"].startswith("postgres"):
        raise SystemExit(f"set {', '.join(missing) or 'DATABASE_URL to PostgreSQL'} (see the docstring)")

    var = Path(tempfile.mkdtemp(prefix="compactweb-load-"))
    os.environ.update(COMPACTWEB_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="compactweb.settings",
                      DJANGO_SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(48),
                      COMPACTWEB_RUN_SIMULATOR="0", PYTHONPATH=str(ROOT))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from compaction_app.models import Compaction, CompactionPolicy, Provider
    from sessions_app import fleet
    from sessions_app.models import RolloutLine, SimulatorRun

    call_command("migrate", verbosity=0)
    if SimulatorRun.objects.filter(status=SimulatorRun.Status.RUNNING).exists():
        raise SystemExit("simulator runs are still running in this database (an earlier run was interrupted?): "
                         "stop them with `manage.py simulate --stop` or use a fresh database")
    tag = secrets.token_hex(4)
    provider = Provider.objects.create(name=f"load-{tag}", base_url=Provider.EMBEDDED, model="sim-1",
                                       context_window=32000, remote_compaction=Provider.RemoteCompaction.V2)
    policy = CompactionPolicy.objects.create(name=f"load-{tag}")
    user = User.objects.create_user(username=f"load-{tag}", password=secrets.token_urlsafe(16))
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    cookie = _cookie(user)
    env = dict(os.environ)
    ports = [_free_port() for _ in range(args.web)]
    logs = open(var / "processes.log", "w")
    children: list[subprocess.Popen] = []
    scheduler = None
    run_ids: list[int] = []
    try:
        for port in ports:
            children.append(subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "compactweb.asgi:application"],
                cwd=ROOT, env=env, stdout=logs, stderr=subprocess.STDOUT))
        for i in range(args.workers):
            children.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "compactweb", "worker", "--pool", "prefork", "--concurrency",
                 str(args.concurrency), "-n", f"load-{tag}-{i}@%h", "-l", "warning"],
                cwd=ROOT, env=env, stdout=logs, stderr=subprocess.STDOUT))
        for port, process in zip(ports, children, strict=False):
            _wait_port(port, process)
        runs = fleet.do_start_fleet(scenario=args.scenario, count=args.sessions, provider=provider, policy=policy,
                                    loop=True, seed=7, context_window=args.context_window)
        run_ids = [r.pk for r in runs]
        session_ids = [r.session_id for r in runs]
        watchers = [Watcher(session_ids[i % len(session_ids)]) for i in range(args.watchers)]

        def measure() -> tuple[int, int, int]:
            return _steps_done(run_ids), Compaction.objects.count(), _db_size()

        async def drive() -> dict:
            nonlocal scheduler
            stop = asyncio.Event()
            tasks = [asyncio.create_task(_watch(
                f"ws://127.0.0.1:{ports[i % len(ports)]}/ws/sessions/{w.session_id}/",
                f"http://127.0.0.1:{ports[i % len(ports)]}", cookie, w, stop)) for i, w in enumerate(watchers)]
            while any(w.first_seq is None for w in watchers):
                await asyncio.sleep(0.1)
                for task in tasks:
                    if task.done():
                        task.result()  # a watcher that could not connect stops the benchmark with its error
            steps0, compactions0, size0 = await asyncio.to_thread(measure)
            scheduler = subprocess.Popen([sys.executable, "manage.py", "simulate", "--scheduler"], cwd=ROOT,
                                         env=env, stdout=logs, stderr=subprocess.STDOUT)
            started = time.monotonic()
            await asyncio.sleep(args.seconds)
            elapsed = time.monotonic() - started
            steps_at_stop, compactions_at_stop, _ = await asyncio.to_thread(measure)
            await asyncio.to_thread(_stop, [scheduler])
            # the workers finish the steps already queued; then the last events reach the watchers
            previous = -1
            while (current := await asyncio.to_thread(_steps_done, run_ids)) != previous:
                previous = current
                await asyncio.sleep(SETTLE_SECONDS)
            await asyncio.sleep(SETTLE_SECONDS)
            stop.set()
            await asyncio.gather(*tasks)
            steps1, compactions1, size1 = await asyncio.to_thread(measure)
            return {"steps": steps_at_stop - steps0, "compactions": compactions_at_stop - compactions0,
                    "all_steps": steps1 - steps0, "growth": size1 - size0, "elapsed": elapsed}

        figures = asyncio.run(drive())
    finally:
        for run_id in run_ids:  # looping runs would go on with the next scheduler started on this database
            fleet.do_stop_run(run=run_id)
        if scheduler is not None:
            _stop([scheduler])
        _stop(children)
        logs.close()

    latencies, dropped, received = [], 0, 0
    for watcher in watchers:
        stamps = dict(RolloutLine.objects.filter(session_id=watcher.session_id, seq__gt=watcher.first_seq)
                      .values_list("seq", "timestamp"))
        missing = set(stamps) - set(watcher.arrivals)
        dropped += len(missing)
        received += len(watcher.arrivals)
        latencies += [(watcher.arrivals[seq] - stamps[seq].timestamp()) * 1000 for seq in watcher.arrivals
                      if seq in stamps]
    latencies.sort()
    q = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [float("nan")] * 99
    turns = figures["steps"]
    print(f"setup: {args.sessions} sessions ({args.scenario}), {args.workers} workers x {args.concurrency}, "
          f"{args.watchers} watchers on {args.web} Daphne processes, {figures['elapsed']:.0f} s")
    print(f"turns: {turns}  ({turns / figures['elapsed']:.1f} turns/s)")
    print(f"compactions: {figures['compactions']}  ({figures['compactions'] / figures['elapsed'] * 60:.1f} /min)")
    print(f"events received by watchers: {received}; latency p50 {q[49]:.0f} ms, p99 {q[98]:.0f} ms")
    print(f"dropped events: {dropped}")
    growth = figures["growth"] / figures["all_steps"] * 1000 / 1e6 if figures["all_steps"] else float("nan")
    print(f"database growth: {figures['growth'] / 1e6:.1f} MB, {growth:.2f} MB per 1,000 turns")


if __name__ == "__main__":
    main()
