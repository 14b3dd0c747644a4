"""Issue 45: a real Prometheus (Debian's `prometheus`, run as a plain binary on loopback with a temporary data
directory and our own config) scrapes a running scale-out set started by scripts/scale-out, and the series are
read back through its HTTP query API: two Daphne processes and a Celery worker (prefork) sharing the set's
multiprocess directory, so either web process answers what all of them counted: gateway requests sent to both,
compactions jobs ran on the worker, the storm alert they raised, the worker's and scheduler's heartbeats and the
dependencies. About a minute on an idle machine."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import AlertSettings, CompactionPolicy, Provider
from compactweb.api_tokens import issue_token
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayRoute
from sessions_app.models import Job
from tests.compactweb.test_metrics_docs import alert_expressions, dashboard_expressions
from tests.scale_out import processes as run
from tests.scale_out.test_redis_restart import start_redis

DEADLINE_SECONDS = 120  # a bound for a broken run only: Prometheus scrapes every 2 s
METRICS_TOKEN = "scrape-token-for-the-prometheus-test"


def post(url: str, body: dict, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, method="POST", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def start_prometheus(*, port: int, targets: list[str], workdir: Path) -> subprocess.Popen:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed (apt-get install prometheus; .ci/run installs it)")
    (workdir / "token").write_text(METRICS_TOKEN)
    config = workdir / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "2s"},
        "scrape_configs": [{
            "job_name": "compactweb", "metrics_path": "/metrics",
            "authorization": {"type": "Bearer", "credentials_file": str(workdir / "token")},
            "static_configs": [{"targets": targets}],
        }],
    }))
    log = open(workdir / "prometheus.log", "w")  # noqa: SIM115 (kept open for the process's life)
    return subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
        stdout=log, stderr=subprocess.STDOUT,
    )


def query(prometheus: str, promql: str) -> list[dict]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:  # a 400 for an expression it cannot parse
        raise AssertionError(f"{promql}: {exc.read().decode()}") from None
    except OSError:
        return []  # not listening yet
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def by_instance(results: list[dict]) -> dict[str, float]:
    return {r["metric"]["instance"]: float(r["value"][1]) for r in results}


def wait_for(prometheus: str, promql: str, expected, logs: dict[str, Path]) -> dict[str, float]:
    """The query's values by instance once `expected(values)` holds (Prometheus has scraped what was done)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    values: dict[str, float] = {}
    while time.monotonic() < deadline:
        values = by_instance(query(prometheus, promql))
        if expected(values):
            return values
        time.sleep(0.5)
    tails = "\n".join(f"--- {n}\n{p.read_text()[-1500:]}" for n, p in logs.items() if p.exists())
    raise AssertionError(f"{promql}: {values}\n{tails}")


def set_running(launcher: subprocess.Popen, ports: list[int], log: Path) -> None:
    deadline = time.monotonic() + run.START_TIMEOUT
    while not all(answers(port) for port in ports):
        assert launcher.poll() is None, f"scripts/scale-out exited:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the set did not answer:\n{log.read_text()[-3000:]}"
        time.sleep(0.5)


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            return response.status == 200
    except OSError:
        return False


def stop_launcher(launcher: subprocess.Popen) -> None:
    """TERM to supervisord: its programs stop (a worker's warm shutdown may take its stopwaitsecs, 60 s)."""
    if launcher.poll() is None:
        launcher.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            launcher.wait(timeout=90)
    run.stop(launcher, sig=signal.SIGKILL)  # only when it is still there


@pytest.mark.services
@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
def test_a_real_prometheus_scrapes_a_scale_out_set_and_reads_every_process_counts(on_postgresql, operator_user,
                                                                                  make_session, tmp_path):
    """The set is scripts/scale-out's own (two web processes, a prefork worker, the scheduler, the watchdog), so
    what it gives every process (the multiprocess directory, the scheduler's heartbeat file) is what is tested."""
    provider = Provider.objects.create(name="embedded-gw", base_url=Provider.EMBEDDED, model="compactweb-sim",
                                       context_window=32000)
    route = GatewayRoute.objects.create(name="team-metrics", provider=provider,
                                        policy=CompactionPolicy.objects.create(name="metrics-policy"))
    gateway_key = do_create_gateway_key(route=route, client_name="ci").key
    session = make_session(items=[user_message("collect the deploy logs"), user_message("find the failing step")])
    api_token = issue_token(user=operator_user)
    storm = AlertSettings.current()
    storm.storm_count, storm.storm_minutes = 1, 10  # a second compaction within 10 minutes is a storm
    storm.save()

    redis_port, prometheus_port, first_port = run.free_port(), run.free_port(), run.free_port()
    ports = [first_port, first_port + 1]  # the launcher's --port and the next one (free_port keeps pairs free)
    own_redis = f"redis://127.0.0.1:{redis_port}"
    env = {**run.child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path),
           "COMPACTWEB_METRICS_TOKEN": METRICS_TOKEN, "CELERY_CONCURRENCY": "1"}
    run_dir = tmp_path / "scale-out"
    logs = {"launcher": tmp_path / "launcher.log", "prometheus": tmp_path / "prometheus.log"}
    redis_server = start_redis(redis_port, tmp_path)
    launcher = prometheus_server = None
    try:
        with open(logs["launcher"], "w") as out:
            launcher = subprocess.Popen(
                [str(run.ROOT / "scripts" / "scale-out"), "--web", "2", "--workers", "1", "--port", str(first_port),
                 "--no-app-role"], env=env, cwd=run.ROOT, stdout=out, stderr=subprocess.STDOUT)
        set_running(launcher, ports, logs["launcher"])
        logs.update({path.stem: path for path in run_dir.glob("*.log")})
        prometheus_server = start_prometheus(port=prometheus_port, targets=[f"127.0.0.1:{p}" for p in ports],
                                             workdir=tmp_path)
        prometheus = f"http://127.0.0.1:{prometheus_port}"

        # three gateway turns through the first web process, two through the second, one without a key
        turn = {"model": "compactweb-sim", "input": [user_message("please fix parser bug 3")]}
        for i, port in enumerate([ports[0]] * 3 + [ports[1]] * 2):
            meta = json.dumps({"thread_id": f"0190aaaa-0000-7000-8000-00000000{i:04d}", "turn_id": "t1"})
            assert post(f"http://127.0.0.1:{port}/gateway/v1/responses", turn,
                        {"Authorization": f"Bearer {gateway_key}", "x-codex-turn-metadata": meta}) == 200
        assert post(f"http://127.0.0.1:{ports[1]}/gateway/v1/responses", turn, {}) == 401
        # two manual compactions through the API, one after the other: jobs the worker's prefork child runs, and
        # a storm alert
        for port in ports:
            assert post(f"http://127.0.0.1:{port}/api/v1/sessions/{session.pk}/compact", {"strategy": "local"},
                        {"Authorization": f"Token {api_token}"}) == 202
            deadline = time.monotonic() + DEADLINE_SECONDS
            while Job.objects.filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).exists():
                assert time.monotonic() < deadline, "the compaction job did not end"
                time.sleep(0.2)

        everyone = lambda values: len(values) == 2  # noqa: E731 (both web processes scraped)
        up = wait_for(prometheus, 'up{job="compactweb"}', lambda v: everyone(v) and set(v.values()) == {1.0}, logs)
        assert len(up) == 2
        # each web process answers the sum over every process: its own requests and the other's
        served = wait_for(prometheus, f'compactweb_gateway_requests_total{{route="{route.name}",endpoint="responses",'
                          'mode="upstream",status="200"}', lambda v: everyone(v) and set(v.values()) == {5.0}, logs)
        assert set(served.values()) == {5.0}
        refused = wait_for(prometheus, 'compactweb_gateway_requests_total{route="none",status="401"}',
                           lambda v: everyone(v) and set(v.values()) == {1.0}, logs)
        assert set(refused.values()) == {1.0}
        first_byte = wait_for(prometheus, f'compactweb_gateway_time_to_first_byte_seconds_count{{route="{route.name}"'
                              ',endpoint="responses"}', lambda v: everyone(v) and set(v.values()) == {5.0}, logs)
        assert set(first_byte.values()) == {5.0}
        compacted = wait_for(prometheus, 'compactweb_compaction_attempts_total{method="local",trigger="manual",'
                             'outcome="completed"}', lambda v: everyone(v) and set(v.values()) == {2.0}, logs)
        assert set(compacted.values()) == {2.0}
        assert list(Job.objects.values_list("status", flat=True)) == [Job.Status.SUCCEEDED] * 2
        wait_for(prometheus, 'compactweb_alerts_open{kind="storm"}',
                 lambda v: everyone(v) and set(v.values()) == {1.0}, logs)
        wait_for(prometheus, 'compactweb_alerts_raised_total{kind="storm"}',
                 lambda v: everyone(v) and set(v.values()) == {1.0}, logs)
        wait_for(prometheus, "compactweb_workers_alive", lambda v: everyone(v) and min(v.values()) >= 1, logs)
        wait_for(prometheus, "compactweb_scheduler_heartbeat_age_seconds",
                 lambda v: everyone(v) and max(v.values()) < 30, logs)
        for dependency in ("database", "channel_layer", "broker"):
            wait_for(prometheus, f'compactweb_dependency_up{{dependency="{dependency}"}}',
                     lambda v: everyone(v) and set(v.values()) == {1.0}, logs)
        # every expression of the Grafana dashboard and of the alert rules is PromQL this Prometheus evaluates
        for expr in dashboard_expressions() + alert_expressions():
            query(prometheus, expr.replace("$__rate_interval", "1m").replace("$route", ".*"))
        wait_for(prometheus, f'sum by (instance) (rate(compactweb_gateway_requests_total{{route="{route.name}"}}[1m]))',
                 lambda v: everyone(v) and min(v.values()) >= 0, logs)
    finally:
        for process in (prometheus_server, launcher, redis_server):
            if process is not None:
                stop_launcher(process)
