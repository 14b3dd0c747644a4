"""Websocket connect burst: N pages opening the session consumer at once on one Daphne, on PostgreSQL + Redis.

What a scale-out web process meets when a fleet starts and its pages open together (issue 15). The benchmark
serves compactweb with Daphne in a subprocess on 127.0.0.1 (the database of DATABASE_URL, migrated; the channel
layer of REDIS_URL), creates N sessions with a short history, logs in once (a session cookie) and measures, from
opening the TCP connection to receiving the hello message:

- the floor: N connects one after another (nothing else in flight), median;
- the burst: N connects started at once, p50 / p99 / max, and the whole burst's wall time.

Figures are ratios against the floor of the same run: burst p50 / floor, and the burst's wall time over N times the
floor (below 1: connects overlap; 1: they run one after another; above 1: each costs more than alone). A connect
that did bounded work one thread hop at a time finishes the burst's first pages early (p50 well below p99); a
shared queue that every stage of every connect waits in makes them all finish together (p50 close to p99).

    DATABASE_URL=postgres://USER@HOST:5432/compactweb_bench REDIS_URL=redis://HOST:6379/4 \
    .venv/bin/python bench/bench_connect.py [--connects 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_websocket import PASSWORD, _free_port, _manage, _start_server  # noqa: E402

MARKER = re.compile(r'data-live-marker="hello"')


def _env(var: Path) -> dict:
    missing = [name for name in ("DATABASE_URL", "REDIS_URL") if not os.environ.get(name, "")]
    if missing or not os.environ["DATABASE_URL"].startswith("postgres"):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and REDIS_URL: the burst is measured as scaled out")
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env.update(COMPACTWEB_VAR_DIR=str(var), DJANGO_DEBUG="0", LOG_LEVEL="WARNING")
    return env


async def _connect(url: str, origin: str, cookie: str) -> float:
    started = time.perf_counter()
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin},
                                  open_timeout=60, max_size=None) as ws:
        message = await asyncio.wait_for(ws.recv(), timeout=60)
        elapsed = (time.perf_counter() - started) * 1000
        assert MARKER.search(message), message[:200]
    return elapsed


async def measure(base: str, cookie: str, sessions: list[int], rounds: int) -> dict:
    ws_base = base.replace("http", "ws")
    urls = [f"{ws_base}/ws/sessions/{s}/" for s in sessions]
    await _connect(urls[0], base, cookie)  # warm-up: the process's first connect (imports, template loading)
    floors, bursts, walls = [], [], []
    for _ in range(rounds):
        floors.extend([await _connect(url, base, cookie) for url in urls])
        started = time.perf_counter()
        bursts.extend(await asyncio.gather(*(_connect(url, base, cookie) for url in urls)))
        walls.append((time.perf_counter() - started) * 1000)
    bursts.sort()
    floor = statistics.median(floors)
    return {
        "connects": len(urls), "rounds": rounds, "floor_ms": floor,
        "p50_ms": statistics.median(bursts), "p99_ms": bursts[max(0, int(len(bursts) * 0.99) - 1)],
        "max_ms": bursts[-1], "wall_ms": statistics.median(walls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connects", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compactweb-bench-connect-") as tmp:
        env = _env(Path(tmp))
        _manage(env, "migrate", "--noinput")
        user = f"bench-{os.getpid()}"
        out = _manage(env, "create_user", "--username", user, "--role", "admin", "--password", PASSWORD)
        token = re.search(r"token: (\w+)", out).group(1)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        server = _start_server(env, port)
        try:
            api = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=60)
            provider = api.post("/api/v1/providers", json={
                "name": f"embedded-{user}", "base_url": "embedded", "model": "sim-1", "context_window": 1_000_000,
            }).raise_for_status().json()["id"]
            policy = api.post("/api/v1/policies", json={"name": f"connect-{user}"}).raise_for_status().json()["id"]
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "check the logs"}]}
            sessions = []
            for i in range(args.connects):
                sid = api.post("/api/v1/sessions", json={"title": f"connect {i}", "provider": provider,
                                                         "policy": policy}).raise_for_status().json()["id"]
                api.post(f"/api/v1/sessions/{sid}/items", json={"items": [item] * 5}).raise_for_status()
                sessions.append(sid)
            result = asyncio.run(measure(base, _cookie_for(base, user), sessions, args.rounds))
        finally:
            server.terminate()
            server.wait(timeout=10)
    r = result
    print(f"{r['connects']} connects × {r['rounds']} rounds, one Daphne, PostgreSQL + Redis")
    print(f"floor (one at a time): {r['floor_ms']:.1f} ms")
    print(f"burst: p50 {r['p50_ms']:.0f} ms  p99 {r['p99_ms']:.0f} ms  max {r['max_ms']:.0f} ms  "
          f"wall {r['wall_ms']:.0f} ms")
    print(f"ratios: burst p50 / floor {r['p50_ms'] / r['floor_ms']:.1f}x, p99 / floor {r['p99_ms'] / r['floor_ms']:.1f}x, "
          f"p50 / p99 {r['p50_ms'] / r['p99_ms']:.2f}, wall / (N x floor) "
          f"{r['wall_ms'] / (r['connects'] * r['floor_ms']):.2f}")


def _cookie_for(base: str, username: str) -> str:
    with httpx.Client(base_url=base) as client:
        client.get("/login/")
        csrf = client.cookies["csrftoken"]
        response = client.post("/login/", data={"username": username, "password": PASSWORD,
                                                "csrfmiddlewaretoken": csrf}, headers={"Referer": base + "/login/"})
        assert response.status_code == 302, response.status_code
        return f"sessionid={client.cookies['sessionid']}"


if __name__ == "__main__":
    main()
