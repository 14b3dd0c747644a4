"""Benchmark: what the metrics of issue 45 cost, each against a floor measured in the same run.

1. The gateway's request metrics: an ASGI app that streams a Responses-sized answer in 60 chunks, called bare (the
   floor) and wrapped by `compactweb.gateway_metrics.observed` (what the dashboard's router mounts), alternating
   rounds; reported per request and as the ratio.
2. A scrape: `GET /metrics` (every family, the state read from the database, the /healthz checks) against
   `GET /healthz` (the same checks alone) through Django's test client, on a SQLite file holding 5,000 alerts and
   5,000 jobs, alternating rounds.

    .venv/bin/python bench/bench_metrics.py [--requests 2000] [--scrapes 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.bench_turns import _provider_and_policy, _setup_django  # noqa: E402

CHUNK = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"word "}\n\n'
CHUNKS = 60


async def streaming_app(scope, receive, send) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for _ in range(CHUNKS):
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def calls(app, requests: int) -> float:
    scope = {"type": "http", "method": "POST", "path": "/r/bench/v1/responses", "headers": []}

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        return None

    started = time.perf_counter()
    for _ in range(requests):
        await app(scope, receive, send)
    return (time.perf_counter() - started) / requests


def gateway_wrapper(requests: int, rounds: int) -> dict[str, float]:
    from compactweb.gateway_metrics import observed

    wrapped = observed(streaming_app)
    bare, metered = [], []
    for _ in range(rounds):
        bare.append(asyncio.run(calls(streaming_app, requests)))
        metered.append(asyncio.run(calls(wrapped, requests)))
    floor, cost = statistics.median(bare), statistics.median(metered)
    return {"bare_us": floor * 1e6, "wrapped_us": cost * 1e6, "added_us": (cost - floor) * 1e6,
            "ratio": cost / floor}


def scrape_against_healthz(scrapes: int, rounds: int) -> dict[str, float]:
    from django.test import Client, override_settings

    from compaction_app.models import Alert
    from sessions_app.models import Job
    from sessions_app.rollout.services import do_create_session

    provider, policy = _provider_and_policy()
    session = do_create_session(title="metrics bench", provider=provider, policy=policy)
    kinds = ["storm", "loop", "reread", "failure_streak", "fleet_storm"]
    Alert.objects.bulk_create(Alert(kind=kinds[i % 5], session=session, message="m") for i in range(5000))
    statuses = [Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.QUEUED, Job.Status.RUNNING]
    Job.objects.bulk_create(Job(kind=Job.Kind.REPLAY, status=statuses[i % 4])
                            for i in range(5000))
    client = Client(HTTP_HOST="localhost")
    token = "bench-token"

    def timed(path: str) -> float:
        started = time.perf_counter()
        for _ in range(scrapes):
            response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {token}")
            assert response.status_code == 200, response.content[:200]
        return (time.perf_counter() - started) / scrapes

    health, scrape = [], []
    with override_settings(COMPACTWEB_METRICS_TOKEN=token):
        for _ in range(rounds):
            health.append(timed("/healthz"))
            scrape.append(timed("/metrics"))
    floor, cost = statistics.median(health), statistics.median(scrape)
    return {"healthz_ms": floor * 1e3, "metrics_ms": cost * 1e3, "ratio": cost / floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _setup_django(Path(tmp))
        wrapper = gateway_wrapper(args.requests, args.rounds)
        print(f"gateway request, {CHUNKS} chunks: bare {wrapper['bare_us']:.1f} us, with metrics "
              f"{wrapper['wrapped_us']:.1f} us (+{wrapper['added_us']:.1f} us, x{wrapper['ratio']:.2f})")
        scrape = scrape_against_healthz(args.scrapes, args.rounds)
        print(f"scrape with 5,000 alerts and 5,000 jobs: /healthz {scrape['healthz_ms']:.2f} ms, /metrics "
              f"{scrape['metrics_ms']:.2f} ms (x{scrape['ratio']:.2f})")


if __name__ == "__main__":
    main()
