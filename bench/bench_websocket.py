"""Websocket fan-out: N browser-like clients watching M busy sessions through the session consumer.

Serves compactweb with Daphne in a subprocess on 127.0.0.1 (the embedded default: a throwaway SQLite file, the
in-memory channel layer; set REDIS_URL to measure the Redis layer instead). M writers append one user message at a
time to their session through the JSON API as fast as the server takes them; N clients (client i watches session
i mod M, logged in with a session cookie) receive the rendered out-of-band HTML.

Latency: from the moment a writer sends the append request to the moment a client receives the message carrying
that item (found by a unique marker in the item's text), so it includes the HTTP request and the commit: an upper
bound of event-to-client latency. Dropped events: every message carries the seqs it covers (data-from..data-seq);
a client that sees a message start after the seq it has plus one has missed something (the page would re-sync).
Also checked: every appended item reached every client watching its session.

    .venv/bin/python bench/bench_websocket.py [--clients 20] [--sessions 5] [--seconds 20] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r'data-live-marker="(\w+)" data-seq="(\d+)"(?: data-from="(\d+)")?')
ITEM = re.compile(r"bench-(\d+)-(\d+)")
PASSWORD = "bench-password-123"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(var: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(COMPACTWEB_VAR_DIR=str(var), SQLITE_PATH=str(var / "bench.sqlite3"), DJANGO_DEBUG="0",
               LOG_LEVEL="WARNING")
    return env


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    return done.stdout


def _start_server(env: dict, port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "compactweb.asgi:application"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("daphne did not start")


def _cookie(base: str) -> str:
    with httpx.Client(base_url=base) as client:
        client.get("/login/")
        csrf = client.cookies["csrftoken"]
        response = client.post("/login/", data={"username": "bench", "password": PASSWORD,
                                                "csrfmiddlewaretoken": csrf}, headers={"Referer": base + "/login/"})
        assert response.status_code == 302, response.status_code
        return f"sessionid={client.cookies['sessionid']}"


class Watcher:
    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.seq = 0
        self.gaps = 0
        self.messages = 0
        self.received: dict[int, float] = {}

    def take(self, html: str, now: float) -> None:
        found = MARKER.search(html)
        if not found:
            return  # transient progress: carries no seq
        kind, seq, start = found.group(1), int(found.group(2)), found.group(3)
        if kind == "hello":
            self.seq = seq
            return
        self.messages += 1
        if start is not None and int(start) != self.seq + 1:
            self.gaps += 1
        self.seq = max(self.seq, seq)
        for sid, k in ITEM.findall(html):
            if int(sid) == self.session_id:
                self.received.setdefault(int(k), now)


async def _watch(ws_url: str, cookie: str, watcher: Watcher, stop: asyncio.Event, ready: asyncio.Event) -> None:
    origin = "http" + ws_url.split("/ws/")[0][len("ws"):]  # ws://host:port/ws/... -> http://host:port (exact check)
    headers = {"Cookie": cookie, "Origin": origin}
    async with websockets.connect(ws_url, additional_headers=headers, max_size=None) as ws:
        watcher.take(await ws.recv(), time.perf_counter())
        ready.set()
        while not stop.is_set():
            try:
                html = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            watcher.take(html, time.perf_counter())


async def _write(
    client: httpx.AsyncClient, session_id: int, sent: dict, done: dict, stop: asyncio.Event
) -> None:
    k = 0
    while not stop.is_set():
        k += 1
        item = {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": f"bench-{session_id}-{k} please check the logs"}]}
        sent[(session_id, k)] = time.perf_counter()
        response = await client.post(f"/api/v1/sessions/{session_id}/items", json={"items": [item]})
        response.raise_for_status()
        done[(session_id, k)] = time.perf_counter()


async def run(base: str, token: str, cookie: str, sessions: list[int], clients: int, seconds: float) -> dict:
    ws_base = base.replace("http", "ws")
    watchers = [Watcher(sessions[i % len(sessions)]) for i in range(clients)]
    stop_watch, stop_write = asyncio.Event(), asyncio.Event()
    readies = [asyncio.Event() for _ in watchers]
    watch_tasks = [
        asyncio.create_task(_watch(f"{ws_base}/ws/sessions/{w.session_id}/", cookie, w, stop_watch, r))
        for w, r in zip(watchers, readies, strict=True)
    ]
    await asyncio.gather(*(r.wait() for r in readies))
    sent: dict[tuple[int, int], float] = {}
    done: dict[tuple[int, int], float] = {}
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30) as http:
        writers = [asyncio.create_task(_write(http, s, sent, done, stop_write)) for s in sessions]
        await asyncio.sleep(seconds)
        stop_write.set()
        await asyncio.gather(*writers)
    await asyncio.sleep(2.0)  # let the last events arrive
    stop_watch.set()
    await asyncio.gather(*watch_tasks)

    latencies, after_response, missing = [], [], 0
    for w in watchers:
        for (sid, k), t0 in sent.items():
            if sid != w.session_id:
                continue
            if k in w.received:
                latencies.append((w.received[k] - t0) * 1000)
                after_response.append((w.received[k] - done[(sid, k)]) * 1000)
            else:
                missing += 1
    latencies.sort()
    after_response.sort()
    appends = sorted((done[key] - t0) * 1000 for key, t0 in sent.items() if key in done)
    return {
        "clients": clients, "sessions": len(sessions), "seconds": seconds,
        "appends": len(sent), "appends_per_s": len(sent) / seconds,
        "deliveries": len(latencies), "messages": sum(w.messages for w in watchers),
        "p50_ms": statistics.median(latencies) if latencies else None,
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] if latencies else None,
        "max_ms": latencies[-1] if latencies else None,
        "append_p50_ms": statistics.median(appends),
        "after_response_p50_ms": statistics.median(after_response) if after_response else None,
        "after_response_p99_ms": after_response[max(0, int(len(after_response) * 0.99) - 1)] if after_response else None,
        "gaps": sum(w.gaps for w in watchers), "missing": missing,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--write", action="store_true", help="print the markdown row for docs/benchmarks.md")
    parser.add_argument("--port", type=int, default=0, help="the server's port (default: any free one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compactweb-bench-ws-") as tmp:
        env = _env(Path(tmp))
        _manage(env, "migrate", "--noinput")
        out = _manage(env, "create_user", "--username", "bench", "--role", "admin", "--password", PASSWORD)
        token = re.search(r"token: (\w+)", out).group(1)
        port = args.port or _free_port()
        base = f"http://127.0.0.1:{port}"
        server = _start_server(env, port)
        try:
            api = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30)
            provider = api.post("/api/v1/providers", json={
                "name": "embedded", "base_url": "embedded", "model": "sim-1", "context_window": 10_000_000,
            }).raise_for_status().json()["id"]
            policy = api.post("/api/v1/policies", json={"name": "bench"}).raise_for_status().json()["id"]
            sessions = [
                api.post("/api/v1/sessions", json={"title": f"busy {i}", "provider": provider, "policy": policy})
                .raise_for_status().json()["id"]
                for i in range(args.sessions)
            ]
            result = asyncio.run(run(base, token, _cookie(base), sessions, args.clients, args.seconds))
        finally:
            server.terminate()
            server.wait(timeout=10)
    layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory"
    print(f"{result['clients']} clients × {result['sessions']} sessions, {result['seconds']:.0f} s, {layer} layer")
    print(f"appends: {result['appends']} ({result['appends_per_s']:.1f}/s), deliveries: {result['deliveries']}, "
          f"websocket messages: {result['messages']}")
    print(f"request→client ms: p50 {result['p50_ms']:.1f}  p99 {result['p99_ms']:.1f}  max {result['max_ms']:.1f}")
    print(f"append request ms: p50 {result['append_p50_ms']:.1f}; response→client ms (negative: the message "
          f"arrived first): p50 {result['after_response_p50_ms']:.1f}  p99 {result['after_response_p99_ms']:.1f}")
    print(f"dropped (seq gaps): {result['gaps']}  items never delivered: {result['missing']}")
    if args.write:
        print(f"| {result['clients']} | {result['sessions']} | {layer} | {result['appends_per_s']:.1f} | "
              f"{result['deliveries']:,} | {result['append_p50_ms']:.0f} | {result['p50_ms']:.0f} | "
              f"{result['p99_ms']:.0f} | {result['after_response_p50_ms']:.0f} | {result['after_response_p99_ms']:.0f} | "
              f"{result['gaps']} | {result['missing']} |")


if __name__ == "__main__":
    main()
