"""The gateway's cost (issue 29): a streamed response through /gateway/v1 against the same response straight from
its upstream, measured side by side in one run.

Serves compactweb with Daphne in a subprocess on 127.0.0.1 (the embedded default: a throwaway SQLite file, one
process). The upstream is the dashboard's own simulated model at /sim/v1 over loopback HTTP, so both paths end at
the same model in the same process; the gateway path adds the hop (key check, body parse, an httpx stream to the
upstream, SSE passed chunk by chunk) and the recording after each stream. Each round sends `--streams` concurrent
streamed requests, either all direct or all through the gateway, alternating rounds so both see the same machine.
Each request is a Codex-shaped body (base instructions first, a history of 40 items and more, a new user message,
the turn metadata header); each of the concurrent streams is one session whose next request carries the last
one's history, the answer's output items and a new user message, as a Codex session's does (so the gateway
records a few new items per request, plus one new session per stream in the warm-up round). Reported: time to first byte and total time, p50 and p99, per path, and
the difference (gateway minus direct); and the server processes' CPU per request of each path (utime + stime from
/proc, Linux only). After each round the script waits until the server processes are idle (untimed), so a round
never pays for the previous round's leftover work (the gateway's records are written after its streams end) and
each path's CPU is its own.

With `--upstream-process` the upstream is a second Daphne process (the same code and database), as a remote
upstream would be: the direct path then never touches the gateway's process, and the difference is the hop's own
work (the gateway's HTTP server and client for the same stream, and the recording); the gateway process's CPU per
request is then the hop's CPU per request, the upstream process's the floor's.

With `--per-event` the simulated model sends each SSE event as its own HTTP chunk (`X-Sim-Stream: events`, as a
server that flushes every event as it makes it) instead of the whole answer in one write: the hop's per-event cost
(the HTTP client reading each chunk) is then in the figures.

    .venv/bin/python bench/bench_gateway.py [--streams 20] [--rounds 10] [--upstream-process] [--per-event] [--port N]
        [--database-url postgres://...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

SEED = """
import django, os
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from compaction_app.models import CompactionPolicy, Provider
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayRoute
port = os.environ["BENCH_PORT"]
upstream = Provider.objects.create(name="sim", base_url=f"http://127.0.0.1:{port}/sim/v1", model="compactweb-sim",
                                   api_key_env="COMPACTWEB_KEY_SIM")
route = GatewayRoute.objects.create(name="bench", provider=upstream, requests_per_minute=0,
                                    policy=CompactionPolicy.objects.create(name="bench"))
print(do_create_gateway_key(route=route, client_name="bench").key)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _text(role: str, text: str) -> dict:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


SESSIONS: dict[tuple[str, int], str] = {}
HISTORIES: dict[tuple[str, int], list[dict]] = {}


PER_EVENT: dict[str, str] = {}  # the header that makes the simulated model send one HTTP chunk per event


def _body(path: str, stream: int, round_: int) -> tuple[dict, dict]:
    """Stream `stream`'s request of round `round_`: one session per stream and path whose history is, as a Codex
    session's, the previous request's history, the answer's output items and a new user message (the first
    request starts with 40 items of earlier conversation)."""
    thread = SESSIONS.setdefault((path, stream), str(uuid.uuid4()))
    history = HISTORIES.setdefault((path, stream), [
        _text("user" if i % 2 == 0 else "assistant", f"message {i} of session {stream}: " + "words " * 30)
        for i in range(40)])
    history.append(_text("user", f"round {round_}: summarise what you did"))
    body = {"model": "compactweb-sim", "stream": True, "prompt_cache_key": thread,
            "input": [_text("developer", "You are a coding agent. " * 50), *history]}
    headers = {"x-codex-turn-metadata": json.dumps({"session_id": thread, "thread_id": thread,
                                                     "turn_id": str(uuid.uuid4()), "request_kind": "turn"}),
               **PER_EVENT}
    return body, headers


def _output_items(raw: bytes) -> list[dict]:
    items = []
    for line in raw.decode().splitlines():
        if line.startswith("data:"):
            event = json.loads(line[5:])
            if event.get("type") == "response.output_item.done":
                items.append(event["item"])
    return items


async def _one(client: httpx.AsyncClient, name: str, url: str, token: str, stream: int, round_: int
               ) -> tuple[float, float]:
    body, headers = _body(name, stream, round_)
    chunks = []
    start = time.perf_counter()
    first = None
    async with client.stream("POST", url, json=body, headers={**headers, "Authorization": f"Bearer {token}"}) as r:
        assert r.status_code == 200, await r.aread()
        async for chunk in r.aiter_raw():
            if first is None:
                first = time.perf_counter()
            chunks.append(chunk)
    end = time.perf_counter()
    HISTORIES[(name, stream)].extend(_output_items(b"".join(chunks)))  # what Codex sends back next (untimed)
    return (first or end) - start, end - start


def _cpu_seconds(pids: list[int], stat: str = "stat") -> float:
    """utime + stime of these processes (every thread; `task/<pid>/stat`: the main thread alone), in seconds; 0
    where /proc is not there."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/{stat.replace('<pid>', str(pid))}").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


MAIN_THREAD = "task/<pid>/stat"  # the event loop's thread: the stream's path (the others record and look up)


async def _settle(pids: list[int], quiet: float = 0.1, limit: float = 5.0) -> None:
    """Wait (at most `limit` s) until these processes used no CPU for `quiet` s: the round's leftover work is done."""
    deadline = time.monotonic() + limit
    before = _cpu_seconds(pids)
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet)
        now = _cpu_seconds(pids)
        if now == before:
            return
        before = now


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))] * 1000


async def _run(base: str, upstream: str, key: str, sim_token: str, streams: int, rounds: int, pids: list[int]
               ) -> dict[str, dict[str, list[float]]]:
    paths = {"direct": (f"{upstream}/sim/v1/responses", sim_token), "gateway": (f"{base}/gateway/v1/responses", key)}
    results = {name: {"ttfb": [], "total": [], "cpu": [0.0] * len(pids), "main": 0.0} for name in paths}
    limits = httpx.Limits(max_connections=streams * 2, max_keepalive_connections=streams * 2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        for name, (url, token) in paths.items():  # warm-up: connections, token caches, the key cache
            await asyncio.gather(*(_one(client, name, url, token, i, 0) for i in range(streams)))
            await _settle(pids)
        for r in range(rounds):
            for name in (["direct", "gateway"] if r % 2 == 0 else ["gateway", "direct"]):
                url, token = paths[name]
                cpu, main = [_cpu_seconds([pid]) for pid in pids], _cpu_seconds(pids[:1], MAIN_THREAD)
                got = await asyncio.gather(*(_one(client, name, url, token, i, r + 1) for i in range(streams)))
                await _settle(pids)
                for n, pid in enumerate(pids):
                    results[name]["cpu"][n] += _cpu_seconds([pid]) - cpu[n]
                results[name]["main"] += _cpu_seconds(pids[:1], MAIN_THREAD) - main
                results[name]["ttfb"] += [t for t, _ in got]
                results[name]["total"] += [t for _, t in got]
    return results


def _serve(port: int, env: dict[str, str]) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                               "compactweb.asgi:application"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/gateway/v1/models", timeout=1)
            return server
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                server.terminate()
                raise
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--upstream-process", action="store_true",
                        help="serve the upstream (/sim) from a second Daphne process, as a remote upstream would be: "
                             "the gateway's process then does the hop's work only")
    parser.add_argument("--per-event", action="store_true",
                        help="the simulated model sends one HTTP chunk per SSE event (X-Sim-Stream: events) instead "
                             "of the whole answer in one write")
    parser.add_argument("--database-url", default="",
                        help="run against this (empty) PostgreSQL database instead of a throwaway SQLite file")
    parser.add_argument("--port", type=int, default=0,
                        help="serve the gateway on this port (and a second process's upstream on the next one) "
                             "instead of free ones: a shared machine's range of your own")
    args = parser.parse_args()
    if args.per_event:
        PER_EVENT["X-Sim-Stream"] = "events"
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as var:
        port, sim_token = args.port or _free_port(), secrets.token_hex(16)
        up_port = (args.port + 1 if args.port else _free_port()) if args.upstream_process else port
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
        if args.database_url:  # an empty PostgreSQL database of the bench's own (it migrates it and seeds a route)
            env["DATABASE_URL"] = args.database_url
        env.update(COMPACTWEB_VAR_DIR=var, SQLITE_PATH=str(Path(var) / "bench.sqlite3"), DJANGO_DEBUG="0",
                   LOG_LEVEL="WARNING", COMPACTWEB_SIM_TOKEN=sim_token, COMPACTWEB_KEY_SIM=sim_token,
                   COMPACTWEB_RUN_SIMULATOR="0", BENCH_PORT=str(up_port),
                   COMPACTWEB_OUTBOUND_ALLOW=f"127.0.0.1:{up_port}",
                   COMPACTWEB_PROVIDER_KEYS=f"COMPACTWEB_KEY_SIM=http://127.0.0.1:{up_port}/sim/v1",
                   DJANGO_SETTINGS_MODULE="compactweb.settings", PYTHONPATH=str(ROOT))
        key = subprocess.run([sys.executable, "-c", SEED], cwd=ROOT, env=env, capture_output=True, text=True,
                             check=True).stdout.strip().splitlines()[-1]
        servers = [_serve(port, env)]
        try:
            if up_port != port:
                servers.append(_serve(up_port, env))
            results = asyncio.run(_run(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{up_port}", key, sim_token,
                                       args.streams, args.rounds, [s.pid for s in servers]))
        finally:
            for server in servers:
                server.terminate()
                server.wait(timeout=10)
    n = n_req = len(results["direct"]["total"])
    where = "a second process" if args.upstream_process else "the gateway's process"
    chunks = "one HTTP chunk per SSE event" if args.per_event else "the answer in one write"
    print(f"{args.streams} concurrent streams, {args.rounds} rounds ({n} requests per path), upstream in {where} "
          f"({chunks}), times in ms")
    print(f"{'':10} {'TTFB p50':>9} {'TTFB p99':>9} {'total p50':>10} {'total p99':>10} {'end-first p50':>14} "
          f"{'end-first p99':>14}")
    for name in ("direct", "gateway"):
        r = results[name]
        # end-first: per request, the time from its first byte to its end (the final event): with the answer in
        # one write, what the path holds the end back for (the gateway's durable-first journal update).
        tail = [t - f for f, t in zip(r["ttfb"], r["total"], strict=True)]
        print(f"{name:10} {_pct(r['ttfb'], 50):9.1f} {_pct(r['ttfb'], 99):9.1f} "
              f"{_pct(r['total'], 50):10.1f} {_pct(r['total'], 99):10.1f} {_pct(tail, 50):14.1f} {_pct(tail, 99):14.1f}")
    d, g = results["direct"], results["gateway"]
    print(f"{'added':10} {_pct(g['ttfb'], 50) - _pct(d['ttfb'], 50):9.1f} {_pct(g['ttfb'], 99) - _pct(d['ttfb'], 99):9.1f} "
          f"{_pct(g['total'], 50) - _pct(d['total'], 50):10.1f} {_pct(g['total'], 99) - _pct(d['total'], 99):10.1f}")
    names = ["gateway process", "upstream process"] if args.upstream_process else ["server process"]
    print("server CPU per request, ms (utime + stime):")
    for n, process in enumerate(names):
        print(f"  {process:17} direct {d['cpu'][n] / n_req * 1000:7.2f}   gateway {g['cpu'][n] / n_req * 1000:7.2f}")
    print(f"  {names[0]:17} its event loop's thread: direct {d['main'] / n_req * 1000:7.2f}   "
          f"gateway {g['main'] / n_req * 1000:7.2f}")
    hop = sum(g["cpu"]) - sum(d["cpu"])
    print(f"  the hop (gateway minus direct, all server processes): {hop / n_req * 1000:.2f} ms per request")


if __name__ == "__main__":
    main()
