"""Scale-out load: a fleet of simulated sessions run by Celery workers, watched over websockets on several Daphne
processes, all on PostgreSQL + Redis (issue 8). Run by hand, not in CI:

    DATABASE_URL=postgres://USER@HOST:5432/compactweb_bench REDIS_URL=redis://HOST:6379/4 \
    CELERY_BROKER_URL=redis://HOST:6379/5 .venv/bin/python bench/bench_load.py \
        [--sessions 100] [--watchers 50] [--web 2] [--workers 2] [--seconds 60] [--scenario many-short-turns] [--context-window N]
        [--connect-late] [--kill-web-after SECONDS] [--worker-nice N] [--model-latency SECONDS]
        [--board-watchers N] [--turns-per-minute N] [--no-affinity] [--profile-workers DIR]

A session's steps go to the worker that holds its caches (session affinity, compactweb.worker_affinity);
`--no-affinity` runs the same set with every step on the shared queue, as before. `--profile-workers DIR` runs every
prefork child under cProfile (bench/profiled_worker.py) and leaves one `worker-<pid>.prof` per child in DIR (its
CPU figures are then the profiler's, not the code's).

Use a database and Redis numbers of their own: the benchmark migrates the database and leaves its sessions there.
The web processes listen on ports the kernel picks, or on the first free ones of COMPACTWEB_TEST_PORTS=FIRST-LAST.
It starts the web processes (Daphne), the workers (`celery worker --pool prefork --concurrency 2`, at niceness
10 as scripts/scale-out runs them; `--worker-nice 0` for none) and one scheduler as subprocesses, starts the
fleet (looping scenarios, as fast as possible), connects the watchers (watcher i watches session i mod N through
web process i mod W, logged in with a session cookie), runs for `--seconds`, stops the scheduler, lets the
workers finish and the events arrive, then prints:

- turns per second and compactions per minute (simulator steps and Compaction rows made while the scheduler ran);
- event latency p50 / p99: from a rollout line's timestamp (taken by the writing worker just before its commit)
  to the moment a watcher receives the websocket message carrying that seq;
- with `--board-watchers`, the same for fleet-board clients (one page each): from the line at a row snapshot's seq
  to its arrival;
- dropped events: seqs a watcher never received in a batch (a gap between batches, or lines written before the end
  that never arrived) — must be 0;
- CPU while the scheduler ran: the machine's busy cores, and the CPU seconds (and ms per turn) of the web
  processes, the workers with their prefork children, the scheduler, this process (the watchers), the whole
  PostgreSQL server, Redis and every other process on the machine (from /proc; Linux only);
- database growth per 1,000 turns (pg_database_size before and after, over every turn run, including the ones
  still queued when the scheduler stopped);
- websocket connect time p50 / p99 / max: from opening the handshake to the hello message. With `--connect-late`
  the watchers all connect at once a few seconds after the scheduler started the whole fleet (the start of N
  sessions at once), else before it starts;
- failover, with `--kill-web-after S`: the first web process is SIGKILLed S seconds into the run; its watchers
  reconnect to the next one (as a load balancer would send them) and re-sync from the hello, as static/js/live.js
  does. Time to recover: from the kill to the last of them receiving a live batch again. Events lost: lines
  neither received live nor covered by a re-sync (must be 0). Live latency p99 after the failover (the survivor's
  lag).
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
BOARD_ROW = re.compile(r'<tr id="session-(\d+)"[^>]*? data-seq="(\d+)"')
SETTLE_SECONDS = 3.0


_ports_given: set[int] = set()


def _free_port() -> int:
    """A free port: the kernel's choice, or with COMPACTWEB_TEST_PORTS=FIRST-LAST (runs that share a machine each
    keep to their own range) the first port of that range not handed out yet that binds."""
    ports = os.environ.get("COMPACTWEB_TEST_PORTS", "")
    if ports:
        first, last = (int(x) for x in ports.split("-"))
        for port in range(first, last + 1):
            if port in _ports_given:
                continue
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _ports_given.add(port)
            return port
        raise SystemExit(f"no free port left in COMPACTWEB_TEST_PORTS={ports}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, process: subprocess.Popen, timeout: float = 180) -> None:
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
    """One browser-like client of ws/sessions/<id>/: which seqs arrived when, the gaps between batches, the lines a
    re-sync covered after a reconnect, and how long each connect took."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.first_seq: int | None = None
        self.last_seq = 0
        self.arrivals: dict[int, float] = {}
        self.resynced: set[int] = set()
        self.dropped = 0
        self.connect_ms: list[float] = []
        self.reconnected_at: float | None = None
        self.hello_again_at: float | None = None
        self.live_again_at: float | None = None

    def take(self, html: str, now: float) -> None:
        found = MARKER.search(html)
        if not found:
            return
        kind, seq, start = found.group(1), int(found.group(2)), found.group(3)
        if kind == "hello":
            if self.reconnected_at is not None and self.hello_again_at is None:
                self.hello_again_at = now
            if self.first_seq is None:
                self.first_seq = self.last_seq = seq
            elif seq > self.last_seq:  # a reconnect behind the writers: the page re-syncs over HTTP
                self.resynced.update(range(self.last_seq + 1, seq + 1))
                self.last_seq = seq
            return
        if kind != "batch" or start is None:
            return
        start = int(start)
        if start > self.last_seq + 1:
            self.dropped += start - self.last_seq - 1
        for covered in range(max(start, self.last_seq + 1), seq + 1):
            self.arrivals[covered] = now
        self.last_seq = max(self.last_seq, seq)
        if self.reconnected_at is not None and self.live_again_at is None:
            self.live_again_at = now


class BoardWatcher:
    """One browser-like client of ws/fleet/ showing one page of the board: when each row snapshot (a session at a
    seq) first arrived. Rows are coalesced (at most one per session per flush), so a snapshot's latency is taken
    from the line at its seq, the newest it carries; a board has no gaps to count."""

    def __init__(self, page: int) -> None:
        self.page = page
        self.first_seq: int | None = None
        self.arrivals: dict[tuple[int, int], float] = {}
        self.connect_ms: list[float] = []
        self.reconnected_at: float | None = None

    def opened(self) -> None:
        self.first_seq = 0

    def take(self, html: str, now: float) -> None:
        for session_id, seq in BOARD_ROW.findall(html):
            self.arrivals.setdefault((int(session_id), int(seq)), now)


async def _watch(urls: list[tuple[str, str]], cookie: str, watcher, stop: asyncio.Event) -> None:
    """Watch through the first web process; when the connection drops, reconnect to the next one that answers."""
    import websockets

    turn = 0
    while not stop.is_set():
        url, origin = urls[turn % len(urls)]
        started = time.monotonic()
        try:
            ws = await websockets.connect(url, origin=origin, additional_headers={"Cookie": cookie}, max_size=None,
                                          open_timeout=30)
        except (OSError, TimeoutError, websockets.exceptions.InvalidHandshake,
                websockets.exceptions.InvalidMessage):
            turn += 1
            await asyncio.sleep(0.5)
            continue
        hello_pending = True
        if isinstance(watcher, BoardWatcher):  # the board sends nothing until a row changes
            watcher.connect_ms.append((time.monotonic() - started) * 1000)
            watcher.opened()
            hello_pending = False
        try:
            async with ws:
                while not stop.is_set():
                    try:
                        html = await asyncio.wait_for(ws.recv(), timeout=0.5)
                    except TimeoutError:
                        continue
                    if hello_pending:
                        watcher.connect_ms.append((time.monotonic() - started) * 1000)
                        hello_pending = False
                    watcher.take(html, time.time())
        except websockets.exceptions.ConnectionClosed:
            if stop.is_set():
                return
            watcher.reconnected_at = watcher.reconnected_at or time.time()
            turn += 1
            await asyncio.sleep(0.2)


# --- CPU accounting (Linux /proc): where the machine's cores go during the measured window ---------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stats() -> dict[int, tuple[int, str, float, float]]:
    """pid -> (ppid, comm, own CPU seconds, reaped children's CPU seconds) for every process."""
    stats = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        ppid, utime, stime, cutime, cstime = int(fields[1]), *(int(x) for x in fields[11:15])
        stats[int(entry)] = (ppid, comm, (utime + stime) / _TICK, (cutime + cstime) / _TICK)
    return stats


def _machine_busy() -> tuple[float, float]:
    """(busy CPU seconds, total CPU seconds) of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK, sum(values[:8]) / _TICK


def cpu_snapshot(roots: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds used so far by each group of process trees (a root and every descendant, so a prefork worker's
    children count with it; a child that exited counts through its parent's reaped time), by this process (the
    watchers and the bench), by PostgreSQL (the whole server: other databases' work included) and Redis, and the
    machine's busy and total seconds."""
    stats = _proc_stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in stats.items():
        children.setdefault(ppid, []).append(pid)

    def tree(pid: int) -> float:
        if pid not in stats:
            return 0.0
        own, reaped = stats[pid][2], stats[pid][3]
        return own + reaped + sum(tree(c) for c in children.get(pid, []))

    figures = {label: sum(tree(pid) for pid in pids) for label, pids in roots.items()}
    figures["bench (watchers)"] = tree(os.getpid()) - sum(figures.values())
    postmasters = [pid for pid, (ppid, comm, *_r) in stats.items()
                   if comm == "postgres" and stats.get(ppid, (0, ""))[1] != "postgres"]
    figures["postgresql (whole server)"] = sum(tree(pid) for pid in postmasters)
    figures["redis"] = sum(tree(pid) for pid, (_p, comm, *_r) in stats.items() if comm == "redis-server")
    figures["other processes"] = tree(1) + tree(2) - sum(figures.values())  # other users' work, kernel threads
    figures["machine busy"], figures["machine total"] = _machine_busy()
    return figures


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
    parser.add_argument("--board-watchers", type=int, default=0,
                        help="clients of the fleet board besides --watchers (board watcher i shows page i mod pages)")
    parser.add_argument("--turns-per-minute", type=float, default=None,
                        help="each session's pace (e.g. 6: a step every 10 s); default as fast as possible")
    parser.add_argument("--web", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2, help="prefork processes per worker")
    parser.add_argument("--worker-nice", type=int, default=10,
                        help="the workers' niceness, as scripts/scale-out gives them (default 10; 0: none)")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--scenario", default="many-short-turns")
    parser.add_argument("--model-latency", type=float, default=0.0,
                        help="seconds the embedded model waits before each answer (its `slow` fault on every "
                             "session), as a real model's latency: the workers then wait instead of competing for "
                             "the cores, which shows whether anything between them is serial")
    parser.add_argument("--context-window", type=int, default=None,
                        help="the simulated model's window (smaller: more compactions)")
    parser.add_argument("--connect-late", action="store_true",
                        help="connect the watchers all at once after the scheduler started the fleet")
    parser.add_argument("--no-affinity", action="store_true",
                        help="every step on the shared queue (COMPACTWEB_STEP_AFFINITY=0), as before issue 34")
    parser.add_argument("--profile-workers", default=None, metavar="DIR",
                        help="profile every worker child with cProfile; one worker-<pid>.prof per child in DIR")
    parser.add_argument("--kill-web-after", type=float, default=None,
                        help="SIGKILL the first web process this many seconds into the run (failover figures)")
    args = parser.parse_args()
    missing = [n for n in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL") if not os.environ.get(n)]
    if missing or not os.environ["DATABASE_URL"].startswith("postgres"):
        raise SystemExit(f"set {', '.join(missing) or 'DATABASE_URL to PostgreSQL'} (see the docstring)")

    var = Path(tempfile.mkdtemp(prefix="compactweb-load-"))
    os.environ.update(COMPACTWEB_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="compactweb.settings",
                      DJANGO_SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(48),
                      COMPACTWEB_RUN_SIMULATOR="0", PYTHONPATH=str(ROOT),
                      COMPACTWEB_STEP_AFFINITY="0" if args.no_affinity else "1")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from compaction_app.models import Compaction, CompactionPolicy, Provider
    from sessions_app.fleet import runtime as fleet
    from sessions_app.fleet.paging import PAGE_SIZE
    from sessions_app.models import RolloutLine, Session, SimulatorRun

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
    killed_at: float | None = None
    try:
        for port in ports:
            children.append(subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "compactweb.asgi:application"],
                cwd=ROOT, env=env, stdout=logs, stderr=subprocess.STDOUT))
        celery = ["-m", "celery"]
        if args.profile_workers:
            Path(args.profile_workers).mkdir(parents=True, exist_ok=True)
            celery = [str(ROOT / "bench" / "profiled_worker.py"), str(Path(args.profile_workers).resolve())]
        for i in range(args.workers):
            children.append(subprocess.Popen(
                ["nice", "-n", str(args.worker_nice), sys.executable, *celery, "-A", "compactweb", "worker",
                 "--pool", "prefork", "--concurrency", str(args.concurrency), "-n", f"load-{tag}-{i}@%h",
                 "-l", "warning"],
                cwd=ROOT, env=env, stdout=logs, stderr=subprocess.STDOUT))
        for port, process in zip(ports, children, strict=False):
            _wait_port(port, process)
        runs = []
        for first in range(0, args.sessions, fleet.MAX_FLEET_SIZE):  # a fleet start takes at most that many
            runs += fleet.do_start_fleet(scenario=args.scenario, count=min(fleet.MAX_FLEET_SIZE, args.sessions - first),
                                         provider=provider, policy=policy, loop=True, seed=7 + first,
                                         context_window=args.context_window, turns_per_minute=args.turns_per_minute)
        run_ids = [r.pk for r in runs]
        session_ids = [r.session_id for r in runs]
        if args.model_latency:
            Session.objects.filter(pk__in=session_ids).update(fault_injection={"fault": f"slow={args.model_latency}"})
        watchers = [Watcher(session_ids[i % len(session_ids)]) for i in range(args.watchers)]
        pages = max(1, -(-len(session_ids) // PAGE_SIZE))
        boards = [BoardWatcher(1 + i % pages) for i in range(args.board_watchers)]

        web, workers = children[:args.web], children[args.web:]

        def measure() -> tuple[int, int, int]:
            return _steps_done(run_ids), Compaction.objects.count(), _db_size()

        def cpu() -> dict[str, float]:
            return cpu_snapshot({"web (daphne)": [p.pid for p in web], "workers (celery)": [p.pid for p in workers],
                                 "scheduler": [scheduler.pid] if scheduler is not None else []})

        async def drive() -> dict:
            nonlocal scheduler, killed_at
            stop = asyncio.Event()
            def urls(i: int, path: str) -> list[tuple[str, str]]:
                order = ports[i % len(ports):] + ports[:i % len(ports)]
                return [(f"ws://127.0.0.1:{p}/ws/{path}", f"http://127.0.0.1:{p}") for p in order]

            async def connect_all() -> list[asyncio.Task]:
                tasks = [asyncio.create_task(_watch(urls(i, f"sessions/{w.session_id}/"), cookie, w, stop))
                         for i, w in enumerate(watchers)]
                tasks += [asyncio.create_task(_watch(urls(i, f"fleet/?page={b.page}"), cookie, b, stop))
                          for i, b in enumerate(boards)]
                while any(w.first_seq is None for w in [*watchers, *boards]):
                    await asyncio.sleep(0.1)
                    for task in tasks:
                        if task.done():
                            task.result()  # a watcher that stopped stops the benchmark with its error
                return tasks

            tasks = [] if args.connect_late else await connect_all()
            steps0, compactions0, size0 = await asyncio.to_thread(measure)
            cpu0 = cpu()
            scheduler = subprocess.Popen([sys.executable, "manage.py", "simulate", "--scheduler"], cwd=ROOT,
                                         env=env, stdout=logs, stderr=subprocess.STDOUT)
            started = time.monotonic()
            if args.connect_late:
                await asyncio.sleep(min(5.0, args.seconds / 4))
                tasks = await connect_all()
            if args.kill_web_after is not None:
                await asyncio.sleep(max(0.0, args.kill_web_after - (time.monotonic() - started)))
                children[0].send_signal(signal.SIGKILL)
                killed_at = time.time()
            await asyncio.sleep(max(0.0, args.seconds - (time.monotonic() - started)))
            elapsed = time.monotonic() - started
            steps_at_stop, compactions_at_stop, _ = await asyncio.to_thread(measure)
            cpu1 = cpu()
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
                    "all_steps": steps1 - steps0, "growth": size1 - size0, "elapsed": elapsed,
                    "cpu": {label: cpu1[label] - cpu0.get(label, 0.0) for label in cpu1}}

        figures = asyncio.run(drive())
    finally:
        for run_id in run_ids:  # looping runs would go on with the next scheduler started on this database
            fleet.do_stop_run(run=run_id)
        if scheduler is not None:
            _stop([scheduler])
        _stop(children)
        logs.close()

    latencies, after_failover, dropped, received = [], [], 0, 0
    for watcher in watchers:
        stamps = dict(RolloutLine.objects.filter(session_id=watcher.session_id, seq__gt=watcher.first_seq)
                      .values_list("seq", "timestamp"))
        missing = set(stamps) - set(watcher.arrivals) - watcher.resynced
        dropped += len(missing)
        received += len(watcher.arrivals)
        for seq, at in watcher.arrivals.items():
            if seq in stamps:
                latencies.append((at - stamps[seq].timestamp()) * 1000)
                if killed_at is not None and stamps[seq].timestamp() > killed_at:
                    after_failover.append(latencies[-1])
    board_latencies, board_received = [], 0
    if boards:
        shown = {key for b in boards for key in b.arrivals}
        stamps = {(sid, seq): at for sid, seq, at in RolloutLine.objects.filter(
            session_id__in={sid for sid, _ in shown}).values_list("session_id", "seq", "timestamp")
            if (sid, seq) in shown}
        for board in boards:
            board_received += len(board.arrivals)
            board_latencies += [(at - stamps[key].timestamp()) * 1000 for key, at in board.arrivals.items()
                                if key in stamps]
    q = _quantiles(latencies)
    connects = _quantiles([ms for w in [*watchers, *boards] for ms in w.connect_ms])
    turns = figures["steps"]
    pace = f", {args.turns_per_minute:g} turns a minute each" if args.turns_per_minute else ""
    print(f"setup: {args.sessions} sessions ({args.scenario}{pace}), {args.workers} workers x {args.concurrency} "
          f"(nice {args.worker_nice}), {args.watchers} watchers on {args.web} Daphne processes, "
          f"{figures['elapsed']:.0f} s" + (f", model latency {args.model_latency} s a request" if args.model_latency else "")
          + (", affinity off (shared queue)" if args.no_affinity else ", session affinity")
          + (", workers profiled" if args.profile_workers else ""))
    print(f"turns: {turns}  ({turns / figures['elapsed']:.1f} turns/s)")
    print(f"compactions: {figures['compactions']}  ({figures['compactions'] / figures['elapsed'] * 60:.1f} /min)")
    print(f"events received by watchers: {received}; latency p50 {q[49]:.0f} ms, p99 {q[98]:.0f} ms")
    if boards:
        bq, allq = _quantiles(board_latencies), _quantiles(latencies + board_latencies)
        print(f"fleet board: {len(boards)} watchers on {pages} pages, {board_received} row snapshots; latency p50 "
              f"{bq[49]:.0f} ms, p99 {bq[98]:.0f} ms; all {len(watchers) + len(boards)} watchers p99 {allq[98]:.0f} ms")
    print(f"dropped events: {dropped}")
    print(f"websocket connect (handshake to hello){' after the fleet started' if args.connect_late else ''}: "
          f"p50 {connects[49]:.0f} ms, p99 {connects[98]:.0f} ms, max {connects[-1]:.0f} ms")
    if killed_at is not None:
        moved = [w for w in watchers if w.reconnected_at is not None]
        back = [w.hello_again_at - killed_at for w in moved if w.hello_again_at is not None]
        live = [w.live_again_at - killed_at for w in moved if w.live_again_at is not None]
        lag = _quantiles(after_failover)
        print(f"failover: web process 1 of {args.web} SIGKILLed at {args.kill_web_after:g} s; {len(moved)} watchers "
              f"reconnected, {len(back)} re-synced (hello) on another web process, time to recover (kill to the "
              f"last hello) {max(back) if back else float('nan'):.1f} s; {len(live)} got a live batch again, the "
              f"last {max(live) if live else float('nan'):.1f} s after the kill; events lost {dropped}; live "
              f"latency after the kill p50 {lag[49]:.0f} ms, p99 {lag[98]:.0f} ms")
    used = figures["cpu"]
    busy, total = used.pop("machine busy"), used.pop("machine total")
    print(f"CPU while the scheduler ran: the machine {busy:.1f} of {total:.1f} core-seconds busy "
          f"({busy / figures['elapsed']:.2f} of {total / figures['elapsed']:.0f} cores); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    for label, seconds in used.items():
        print(f"  {label:<28} {seconds:7.1f} s  {seconds / figures['elapsed']:.2f} cores  "
              f"{seconds / turns * 1000 if turns else float('nan'):6.1f} ms per turn")
    growth = figures["growth"] / figures["all_steps"] * 1000 / 1e6 if figures["all_steps"] else float("nan")
    print(f"database growth: {figures['growth'] / 1e6:.1f} MB, {growth:.2f} MB per 1,000 turns")


def _quantiles(values: list[float]) -> list[float]:
    """Percentiles 1..99 and the maximum (index -1)."""
    values = sorted(values)
    if len(values) < 2:
        return [float("nan")] * 100
    return [*statistics.quantiles(values, n=100, method="inclusive"), values[-1]]


if __name__ == "__main__":
    main()
