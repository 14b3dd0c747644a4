"""Round three of the labelled set (issue 46): the facts the round-two scorer could not see or could not match.

Every planted fact here has its ground truth written by hand per rendering, before any scorer ran on it:

- **tool-output value**: a config value, a version or an id stated only in a tool's output (the agent never
  repeats it);
- **unnamed failure**: a failure whose line has no word "error" (OOM kill, OOMKilled pod, segfault, FATAL);
- **unit**: a number with a unit; a correct conversion is kept ("1.8 GiB" for 1843 MiB), a wrong unit is lost
  ("1843 KiB");
- **corrected later**: a value corrected later in the history; only the latest value counts, a summary with the
  stale value has lost it;
- **paraphrase styles**: every summary is written in one style per session (bullets, prose, a table, a numbered
  list), and each fact has paraphrases of its own;
- **second and third compactions**: a session may compact two or three times; at each compaction the truth is
  what the window holds of *every* fact planted so far (a fact lost at the first stays lost until the window holds
  it again, e.g. after the agent re-reads the file).

The set has two parts built from different templates: `TUNE` (what the scorer was tuned on) and `HELD_OUT`
(output formats, wordings and summary styles the scorer's author did not tune on). `sessions(part)` builds a
deterministic list of `Session`s, each with its compactions (`Step`s: before, after, truth).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from tests.compaction_app.engine.retention.labelled_set import (
    AGENTS,
    assistant,
    exec_out,
    fcall,
    fout,
    shell_out,
)

TUNE = "tune"
HELD_OUT = "held_out"
# Written after the scorer of round three was done, run once, never debugged on: what the scorer does on templates
# its author did not have in mind when building it.
BLIND = "blind"
# A second blind part, written at the end of round three and run once before the scorer was fixed on it (first run
# in docs/benchmarks.md).
BLIND_2 = "blind_2"
PARTS = (TUNE, HELD_OUT, BLIND, BLIND_2)


@dataclass
class Fact:
    """One planted fact: `kind` as the scorer names it, `tag` a string only this fact's text holds, `group` the
    family it belongs to (how the bench reports it), the items that plant it, and its renderings:
    (label, truth_held, keep_items_verbatim, summary_claims)."""

    kind: str
    tag: str
    group: str
    items: list[dict]
    renderings: list[tuple[str, bool, bool, list[str]]]


@dataclass
class Step:
    """One compaction: the history before, the window after, the truth of every fact planted so far."""

    before: list[dict]
    after: list[dict]
    truth: dict[tuple[str, str], bool] = field(default_factory=dict)
    labels: dict[tuple[str, str], str] = field(default_factory=dict)
    groups: dict[tuple[str, str], str] = field(default_factory=dict)


@dataclass
class Session:
    name: str
    part: str
    style: str
    steps: list[Step] = field(default_factory=list)


def _cid(n: int, phase: int, slot: str) -> str:
    return f"r3_{n}_{phase}_{slot}"


# ---------------------------------------------------------------------------------------------------------------
# Tuning templates
# ---------------------------------------------------------------------------------------------------------------

def _tune_facts(n: int, phase: int) -> list[Fact]:
    k = n * 10 + phase  # unique per session and phase
    port, pool = 19000 + k, 30 + k % 50
    cfg = f"deploy/app-{k}.toml"
    c1 = _cid(n, phase, "cfg")
    cfg_items = [fcall(c1, "exec_command", cmd=f"cat {cfg}"),
                 fout(c1, exec_out(0, f"[server]\nlisten_port = {port}\nworkers = 8\n[database]\n"
                                      f"pool_size = {pool}\n"))]
    facts = [Fact("value", str(port), "tool-output value", cfg_items, [
        ("verbatim", True, True, []),
        ("key = value", True, False, [f"{cfg} sets listen_port = {port}."]),
        ("sentence", True, False, [f"The server listens on port {port} (from {cfg})."]),
        ("wrong value", False, False, [f"{cfg} sets listen_port = {port + 100}."]),
        ("file only", False, False, [f"Read {cfg}."]),
        ("dropped", False, False, []),
    ])]
    version = f"7.{k}.3"
    c2 = _cid(n, phase, "ver")
    # Each phase asks about another package: the same command run again would state the current version, a
    # correction of the first (that is the "corrected later" family).
    package = ("stripe", "boto3", "celery")[phase]
    ver_items = [fcall(c2, "shell", command=["bash", "-lc", f"pip show {package}"]),
                 fout(c2, shell_out(0, f"Name: {package}\nVersion: {version}\nSummary: the {package} "
                                       "package\nLocation: /usr/lib/python3/site-packages"))]
    facts.append(Fact("value", version, "tool-output value", ver_items, [
        ("verbatim", True, True, []),
        ("sentence", True, False, [f"The installed {package} package is version {version}."]),
        ("wrong version", False, False, [f"The installed {package} package is version 7.{k}.4."]),
        ("unspecific", False, False, [f"Checked which {package} version is installed."]),
        ("dropped", False, False, []),
    ]))
    # Unnamed failures: an OOM kill (dmesg wording) or an OOMKilled pod in an exit-0 table.
    c3 = _cid(n, phase, "fail")
    if k % 2:
        pid = 30000 + k
        fail_items = [fcall(c3, "exec_command", cmd=f"python -m jobs.rebuild_index --shard {k}"),
                      fout(c3, exec_out(137, f"loading shard {k}\nloaded 1200000 rows\n"
                                             f"Out of memory: Killed process {pid} (python3)"))]
        facts.append(Fact("error", str(pid), "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"The index rebuild ran out of memory: process {pid} (python3) was "
                                         "killed."]),
            ("generic", False, False, [f"The index rebuild of shard {k} did not finish."]),
            ("dropped", False, False, []),
        ]))
    else:
        pod = f"refund-api-{k}-7d9f"
        fail_items = [fcall(c3, "exec_command", cmd="kubectl get pods -n payments"),
                      fout(c3, exec_out(0, "NAME                 READY   STATUS      RESTARTS      AGE\n"
                                           f"ledger-{k}-5c1a      1/1     Running     0             3h\n"
                                           f"{pod}    0/1     OOMKilled   4 (12s ago)   3m"))]
        facts.append(Fact("error", pod, "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"Pod {pod} is OOMKilled and keeps restarting (4 restarts)."]),
            ("generic", False, False, ["One payments pod keeps restarting."]),
            ("wrong pod", False, False, [f"Pod refund-api-{k}-8e2b is OOMKilled."]),
            ("dropped", False, False, []),
        ]))
    # A number with a unit, from a profile the agent read (and did not repeat).
    mib = 1800 + k
    c4 = _cid(n, phase, "mem")
    mem_items = [fcall(c4, "exec_command", cmd=f"python -m jobs.export --profile --batch {k}"),
                 fout(c4, exec_out(0, f"rows exported: 120000\npeak memory: {mib} MiB\n"))]
    facts.append(Fact("value", f"{mib} MiB", "unit", mem_items, [
        ("verbatim", True, True, []),
        ("same unit", True, False, [f"The export of batch {k} peaked at {mib} MiB of memory."]),
        ("GiB", True, False, [f"The export of batch {k} peaked at about {mib / 1024:.1f} GiB of memory."]),
        ("MB", True, False, [f"The export of batch {k} peaked at {mib * 1.048576:.0f} MB of memory."]),
        ("wrong unit KiB", False, False, [f"The export of batch {k} peaked at {mib} KiB of memory."]),
        ("wrong unit GB", False, False, [f"The export of batch {k} peaked at {mib} GB of memory."]),
        ("dropped", False, False, []),
    ]))
    # A value corrected later: read from a file, then corrected by the user.
    old, new = 300 + k, 600 + k
    c5 = _cid(n, phase, "rate")
    rate_items = [fcall(c5, "exec_command", cmd="grep -n RATE_LIMIT_PER_MIN settings/prod.env"),
                  fout(c5, exec_out(0, f"14:RATE_LIMIT_PER_MIN={old}")),
                  assistant(f"RATE_LIMIT_PER_MIN is {old} in prod; the burst test needs more."),
                  user_message(f"Correction: ops raised it yesterday, RATE_LIMIT_PER_MIN is now {new}.")]
    facts.append(Fact("value", "rate_limit_per_min", "corrected later", rate_items, [
        ("verbatim", True, True, []),
        ("latest", True, False, [f"RATE_LIMIT_PER_MIN = {new} (raised from {old} by ops)."]),
        ("latest, sentence", True, False, [f"The prod rate limit is now {new} per minute (RATE_LIMIT_PER_MIN)."]),
        ("stale", False, False, [f"RATE_LIMIT_PER_MIN is {old} in prod."]),
        ("dropped", False, False, []),
    ]))
    return facts


# ---------------------------------------------------------------------------------------------------------------
# Held-out templates: other output formats, other wordings (never tuned on)
# ---------------------------------------------------------------------------------------------------------------

def _held_out_facts(n: int, phase: int) -> list[Fact]:
    k = n * 10 + phase
    port, replicas = 24000 + k, 2 + k % 7
    c1 = _cid(n, phase, "cfg")
    cfg_items = [fcall(c1, "shell", command=["bash", "-lc", f"kubectl get svc checkout-{k} -o json | jq .spec"]),
                 fout(c1, shell_out(0, json.dumps({"type": "ClusterIP", "ports": [
                     {"name": "http", "port": port, "protocol": "TCP"}]}, indent=2)))]
    facts = [Fact("value", str(port), "tool-output value", cfg_items, [
        ("verbatim", True, True, []),
        ("sentence", True, False, [f"The checkout-{k} service exposes http on port {port}."]),
        ("wrong value", False, False, [f"The checkout-{k} service exposes http on port {port + 1}."]),
        ("unspecific", False, False, [f"Looked at the checkout-{k} service spec."]),
        ("dropped", False, False, []),
    ])]
    vol = f"vol-0{k:04d}e9c"
    c2 = _cid(n, phase, "id")
    id_items = [fcall(c2, "exec_command", cmd=f"./scripts/provision-volume --size 50 --name data-{k}"),
                fout(c2, exec_out(0, f"requesting 50 GiB gp3 in eu-west-1\nvolume ready: {vol}\n"
                                     f"attached replicas: {replicas}"))]
    facts.append(Fact("value", vol, "tool-output value", id_items, [
        ("verbatim", True, True, []),
        ("sentence", True, False, [f"Provisioned volume {vol} (50 GiB, eu-west-1)."]),
        ("wrong id", False, False, [f"Provisioned volume vol-0{k:04d}e9d (50 GiB)."]),
        ("unspecific", False, False, ["Provisioned a 50 GiB volume."]),
        ("dropped", False, False, []),
    ]))
    c3 = _cid(n, phase, "fail")
    if k % 2:
        binary = f"./bin/indexer-{k}"
        fail_items = [fcall(c3, "shell", command=["bash", "-lc", f"{binary} --rebuild"]),
                      fout(c3, shell_out(139, f"bash: line 1: {5000 + k} Segmentation fault      (core dumped) "
                                              f"{binary} --rebuild"))]
        facts.append(Fact("error", f"indexer-{k}", "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"{binary} --rebuild segfaulted (core dumped)."]),
            ("generic", False, False, [f"Tried {binary} --rebuild; it stopped."]),
            ("dropped", False, False, []),
        ]))
    else:
        db = f"refunds_{k}"
        fail_items = [fcall(c3, "exec_command", cmd=f"psql -h db -d {db} -c 'select 1'"),
                      fout(c3, exec_out(2, f'psql: FATAL:  database "{db}" does not exist'))]
        facts.append(Fact("error", db, "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"psql could not connect: database {db} does not exist (FATAL)."]),
            ("generic", False, False, ["psql could not connect."]),
            ("dropped", False, False, []),
        ]))
    secs = 90 + k
    c4 = _cid(n, phase, "time")
    t_items = [fcall(c4, "exec_command", cmd=f"make e2e SUITE=checkout-{k}"),
               fout(c4, exec_out(0, f"42 scenarios, 42 passed\nsuite wall time: {secs} s\n"))]
    facts.append(Fact("value", f"{secs} s", "unit", t_items, [
        ("verbatim", True, True, []),
        ("same unit", True, False, [f"The checkout-{k} e2e suite takes {secs} seconds."]),
        ("minutes", True, False, [f"The checkout-{k} e2e suite takes about {secs / 60:.1f} minutes."]),
        ("wrong unit ms", False, False, [f"The checkout-{k} e2e suite takes {secs} ms."]),
        ("wrong unit min", False, False, [f"The checkout-{k} e2e suite takes {secs} minutes."]),
        ("dropped", False, False, []),
    ]))
    old, new = 40 + k, 80 + k
    c5, c6 = _cid(n, phase, "to1"), _cid(n, phase, "to2")
    to_items = [fcall(c5, "shell", command=["bash", "-lc", "grep worker_timeout config/gunicorn.yaml"]),
                fout(c5, shell_out(0, f"worker_timeout: {old}")),
                fcall(c6, "shell", command=["bash", "-lc", f"sed -i 's/worker_timeout: {old}/worker_timeout: {new}/' "
                                                           "config/gunicorn.yaml && grep worker_timeout "
                                                           "config/gunicorn.yaml"]),
                fout(c6, shell_out(0, f"worker_timeout: {new}"))]
    facts.append(Fact("value", "worker_timeout", "corrected later", to_items, [
        ("verbatim", True, True, []),
        ("latest", True, False, [f"Raised worker_timeout in config/gunicorn.yaml from {old} to {new}."]),
        ("stale", False, False, [f"config/gunicorn.yaml has worker_timeout: {old}."]),
        ("dropped", False, False, []),
    ]))
    return facts


# ---------------------------------------------------------------------------------------------------------------
# Blind templates: written after the round-three scorer, run once
# ---------------------------------------------------------------------------------------------------------------

def _blind_facts(n: int, phase: int) -> list[Fact]:
    k = n * 10 + phase
    host_port = 31000 + k
    c1 = _cid(n, phase, "ports")
    port_items = [fcall(c1, "exec_command", cmd=f"docker inspect --format '{{{{json .NetworkSettings.Ports}}}}' web-{k}"),
                  fout(c1, exec_out(0, json.dumps({"8080/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(host_port)}]})))]
    facts = [Fact("value", str(host_port), "tool-output value", port_items, [
        ("verbatim", True, True, []),
        ("sentence", True, False, [f"web-{k} publishes container port 8080 on host port {host_port}."]),
        ("wrong port", False, False, [f"web-{k} publishes container port 8080 on host port {host_port + 2}."]),
        ("unspecific", False, False, [f"Inspected the ports of web-{k}."]),
        ("dropped", False, False, []),
    ])]
    sha = f"9f2c4e1{k:04d}ab"
    c2 = _cid(n, phase, "sha")
    sha_items = [fcall(c2, "shell", command=["bash", "-lc", f"git -C services/web-{k} rev-parse --short=13 HEAD"]),
                 fout(c2, shell_out(0, sha))]
    facts.append(Fact("value", sha, "tool-output value", sha_items, [
        ("verbatim", True, True, []),
        ("sentence", True, False, [f"services/web-{k} is at commit {sha}."]),
        ("wrong sha", False, False, [f"services/web-{k} is at commit 9f2c4e1{k:04d}ac."]),
        ("dropped", False, False, []),
    ]))
    c3 = _cid(n, phase, "fail")
    if k % 2:
        fail_items = [fcall(c3, "exec_command", cmd="docker compose up --abort-on-container-exit"),
                      fout(c3, exec_out(0, f"web-{k}  | listening on 8080\nqueue-worker-{k} exited with code 137"))]
        facts.append(Fact("error", f"queue-worker-{k}", "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"queue-worker-{k} exited with code 137 under docker compose."]),
            ("generic", False, False, ["docker compose came up; one container stopped."]),
            ("dropped", False, False, []),
        ]))
    else:
        fail_items = [fcall(c3, "exec_command", cmd=f"./bin/healthcheck db-{k}"),
                      fout(c3, exec_out(3, f"probing db-{k}:5432\nTimeout: no response from db-{k}:5432 after 30s"))]
        facts.append(Fact("error", f"db-{k}:5432", "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"The healthcheck got no response from db-{k}:5432 within 30s (timeout)."]),
            ("generic", False, False, [f"The healthcheck of db-{k} did not pass."]),
            ("dropped", False, False, []),
        ]))
    ms = 200 + k
    c4 = _cid(n, phase, "lat")
    lat_items = [fcall(c4, "exec_command", cmd=f"./bench/latency --route /checkout-{k}"),
                 fout(c4, exec_out(0, f"requests: 5000\nlatency p50: 41ms\nlatency p99: {ms}ms\n"))]
    facts.append(Fact("value", f"{ms}ms", "unit", lat_items, [
        ("verbatim", True, True, []),
        ("seconds", True, False, [f"p99 latency of /checkout-{k} is {ms / 1000:.3f} s."]),
        ("same unit", True, False, [f"p99 latency of /checkout-{k} is {ms} ms."]),
        ("wrong unit", False, False, [f"p99 latency of /checkout-{k} is {ms} s."]),
        ("dropped", False, False, []),
    ]))
    old, new = 100 + k, 250 + k
    c5, c6 = _cid(n, phase, "pg1"), _cid(n, phase, "pg2")
    pg_items = [fcall(c5, "exec_command", cmd=f"grep max_connections /etc/postgresql/pg-{k}/postgresql.conf"),
                fout(c5, exec_out(0, f"max_connections = {old}")),
                fcall(c6, "exec_command", cmd=f"psql -h pg-{k} -c 'ALTER SYSTEM SET max_connections = {new}'"),
                fout(c6, exec_out(0, "ALTER SYSTEM"))]
    facts.append(Fact("value", f"pg-{k}/postgresql.conf", "corrected later", pg_items, [
        ("verbatim", True, True, []),
        ("latest", True, False, [f"pg-{k}: max_connections raised to {new} (was {old})."]),
        ("stale", False, False, [f"pg-{k} allows max_connections = {old}."]),
        ("dropped", False, False, []),
    ]))
    return facts


def _blind_2_facts(n: int, phase: int) -> list[Fact]:
    k = n * 10 + phase
    endpoint = f"db-{k}.c9x2.eu-west-1.rds.amazonaws.com"
    c1 = _cid(n, phase, "tf")
    tf_items = [fcall(c1, "exec_command", cmd=f"terraform -chdir=infra/stack-{k} output -json"),
                fout(c1, exec_out(0, json.dumps({"db_endpoint": {"sensitive": False, "value": endpoint},
                                                 "db_port": {"sensitive": False, "value": 5432}})))]
    facts = [Fact("value", endpoint, "tool-output value", tf_items, [
        ("verbatim", True, True, []),
        ("sentence", True, False, [f"The stack-{k} database endpoint is {endpoint} (port 5432)."]),
        ("wrong host", False, False, [f"The stack-{k} database endpoint is db-{k + 1}.c9x2.eu-west-1.rds.amazonaws.com."]),
        ("unspecific", False, False, [f"Read the terraform outputs of stack-{k}."]),
        ("dropped", False, False, []),
    ])]
    pid = 7000 + k
    c2 = _cid(n, phase, "pid")
    pid_items = [fcall(c2, "shell", command=["bash", "-lc", f"systemctl show -p MainPID worker@{k}"]),
                 fout(c2, shell_out(0, f"MainPID={pid}"))]
    facts.append(Fact("value", str(pid), "tool-output value", pid_items, [
        ("verbatim", True, True, []),
        ("sentence", True, False, [f"worker@{k} runs as PID {pid}."]),
        ("wrong pid", False, False, [f"worker@{k} runs as PID {pid + 10}."]),
        ("dropped", False, False, []),
    ]))
    c3 = _cid(n, phase, "fail")
    if k % 2:
        fail_items = [fcall(c3, "exec_command", cmd=f"npm run build --workspace=web-{k}"),
                      fout(c3, exec_out(1, f"> web-{k}@1.0.0 build\nnpm ERR! code ELIFECYCLE\nnpm ERR! errno 137\n"
                                           f"npm ERR! web-{k}@1.0.0 build: `vite build`"))]
        facts.append(Fact("error", f"web-{k}@1.0.0", "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"npm run build of web-{k}@1.0.0 died with errno 137 (ELIFECYCLE)."]),
            ("generic", False, False, [f"The web-{k} build did not go through."]),
            ("dropped", False, False, []),
        ]))
    else:
        fail_items = [fcall(c3, "exec_command", cmd=f"curl -sI https://status-{k}.internal/health"),
                      fout(c3, exec_out(0, "HTTP/1.1 503 Service Unavailable\nretry-after: 30"))]
        facts.append(Fact("error", "503", "unnamed failure", fail_items, [
            ("verbatim", True, True, []),
            ("paraphrase", True, False, [f"status-{k}.internal/health answers 503 Service Unavailable."]),
            ("generic", False, False, [f"status-{k}.internal/health is not healthy."]),
            ("dropped", False, False, []),
        ]))
    mb = 300 + k
    c4 = _cid(n, phase, "img")
    img_items = [fcall(c4, "exec_command", cmd=f"docker image inspect api:{k} --format '{{{{.Size}}}}'"),
                 fout(c4, exec_out(0, f"image size: {mb} MB"))]
    facts.append(Fact("value", f"{mb} MB", "unit", img_items, [
        ("verbatim", True, True, []),
        ("GB", True, False, [f"The api:{k} image is {mb / 1000:.2f} GB."]),
        ("wrong unit", False, False, [f"The api:{k} image is {mb} GB."]),
        ("dropped", False, False, []),
    ]))
    old, new = 8000 + k, 9000 + k
    c5 = _cid(n, phase, "port")
    port_items = [fcall(c5, "exec_command", cmd=f"grep APP_PORT services/app-{k}/.env"),
                  fout(c5, exec_out(0, f"APP_PORT={old}")),
                  user_message(f"Actually use {new} for APP_PORT of app-{k}; {old} is taken.")]
    facts.append(Fact("value", f"app-{k}/.env", "corrected later", port_items, [
        ("verbatim", True, True, []),
        ("latest", True, False, [f"app-{k} will listen on APP_PORT {new} ({old} was taken)."]),
        ("stale", False, False, [f"app-{k} listens on APP_PORT {old}."]),
        ("dropped", False, False, []),
    ]))
    return facts


# ---------------------------------------------------------------------------------------------------------------
# Summary styles and sessions
# ---------------------------------------------------------------------------------------------------------------

STYLES = {TUNE: ("bullets", "prose"), HELD_OUT: ("table", "numbered"), BLIND: ("sections", "semicolons"),
          BLIND_2: ("bullets", "numbered")}


def render(style: str, claims: list[str]) -> str:
    if not claims:
        return "Work in progress; nothing to report yet."
    if style == "bullets":
        return "\n".join(f"- {c}" for c in claims)
    if style == "prose":
        return "So far: " + " ".join(claims)
    if style == "sections":
        half = (len(claims) + 1) // 2
        return "## Where things stand\n" + " ".join(claims[:half]) + "\n\n## Also\n" + " ".join(claims[half:])
    if style == "semicolons":
        return "State: " + "; ".join(c.rstrip(".") for c in claims) + "."
    if style == "table":
        return "| # | state |\n|---|---|\n" + "\n".join(f"| {i} | {c} |" for i, c in enumerate(claims, 1))
    return "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))


def _summary(style: str, claims: list[str]) -> dict:
    return user_message(f"{SUMMARY_PREFIX}\n{render(style, claims)}")


def _build(n: int, part: str, rng: random.Random) -> Session:
    make = {TUNE: _tune_facts, HELD_OUT: _held_out_facts, BLIND: _blind_facts, BLIND_2: _blind_2_facts}[part]
    style = rng.choice(STYLES[part])
    session = Session(name=f"{part}-{n}", part=part, style=style)
    compactions = 1 + n % 3
    window: list[dict] = [AGENTS, user_message(f"Get the payments service {n} ready for the load test.")]
    # What each fact's current claim in the window is (None: not held), carried across compactions.
    claim_of: dict[tuple[str, str], tuple[str, list[str], bool]] = {}
    all_facts: dict[tuple[str, str], Fact] = {}
    for phase in range(compactions):
        new = make(n, phase)
        rng.shuffle(new)
        before = list(window)
        for fact in new:
            before += fact.items
        # From the second compaction on, the agent sometimes re-reads a fact's items (the window may hold it again).
        reread: Fact | None = None
        if phase and all_facts and rng.random() < 0.5:
            reread = all_facts[rng.choice(sorted(all_facts))]
            before += reread.items
        step = Step(before=before, after=[])
        kept_items: list[dict] = []
        claims: list[str] = []
        for fact in [*new, *([reread] if reread else [])]:
            key = (fact.kind, fact.tag)
            all_facts[key] = fact
            label, held, verbatim, lines = rng.choice(fact.renderings)
            claim_of[key] = (label, lines, held)
            if verbatim:
                kept_items += fact.items
        # Facts of earlier phases that were not re-read: the new summary restates what the last window held
        # (or drops it, a loss at this compaction); what was lost before stays lost.
        for key, (label, lines, held) in list(claim_of.items()):
            fact = all_facts[key]
            if fact in new or fact is reread:
                continue
            if held and rng.random() < 0.25:
                claim_of[key] = (f"{label}, dropped at compaction {phase + 1}", [], False)
            elif label.startswith("verbatim") and held:
                # Items kept verbatim at a previous compaction: summarised now by a faithful paraphrase.
                faithful = [r for r in fact.renderings if r[1] and not r[2]]
                _, _, _, lines = faithful[0]
                claim_of[key] = (f"paraphrased at compaction {phase + 1}", lines, True)
        for key, (label, lines, held) in claim_of.items():
            step.truth[key] = held
            step.labels[key] = label
            step.groups[key] = all_facts[key].group
            claims += lines
        rng.shuffle(claims)
        verbatim_kept = [i for i in before if i in kept_items]
        step.after = [AGENTS, before[1], *verbatim_kept, _summary(style, claims)]
        session.steps.append(step)
        window = step.after
        # What stayed verbatim is in the next window as items; the next summary must restate it or drop it.
        for key, (label, lines, held) in list(claim_of.items()):
            if label == "verbatim":
                claim_of[key] = ("verbatim (kept as items)", lines, held)
    return session


def sessions(part: str = TUNE, count: int = 40, seed: int = 46) -> list[Session]:
    rng = random.Random(f"{seed}-{part}")
    return [_build(n, part, rng) for n in range(1, count + 1)]


ORDINALS = {1: "first compactions", 2: "second compactions", 3: "third compactions"}
GROUPS = ("tool-output value", "unnamed failure", "unit", "corrected later")


@dataclass
class Tally:
    """Lost facts found / lost facts, held facts called lost / held facts, per group; misses by label."""

    found: int = 0
    lost: int = 0
    false_lost: int = 0
    held: int = 0
    misses: list[str] = field(default_factory=list)

    def add(self, *, held: bool, said_lost: bool, miss: str) -> None:
        if held:
            self.held += 1
            self.false_lost += said_lost
        else:
            self.lost += 1
            self.found += said_lost
        if held == said_lost:
            self.misses.append(miss)

    @property
    def recall(self) -> float | None:
        return self.found / self.lost if self.lost else None

    @property
    def false_lost_rate(self) -> float | None:
        return self.false_lost / self.held if self.held else None


def evaluate(all_sessions: list[Session], score, carry) -> dict[str, Tally]:
    """Score every compaction of every session the way compactweb does (each compaction with the facts the last
    score carries) and compare each planted fact with its truth. A planted fact the scorer did not extract at all
    is not called lost: it counts as a miss when it was lost. Returns tallies by group, by compaction ordinal
    (ORDINALS) and "all"."""
    tallies: dict[str, Tally] = {"all": Tally()}
    for session in all_sessions:
        carried: list = []
        for ordinal, step in enumerate(session.steps, start=1):
            result = score(step.before, step.after, carried=carried)
            for (kind, tag), held in step.truth.items():
                verdicts = [v for v in result.verdicts
                            if v.fact.kind.value == kind and tag.lower() in v.fact.text.lower()]
                said_lost = any(not v.kept for v in verdicts)
                group = step.groups[(kind, tag)]
                miss = (f"{session.name} {group} / {step.labels[(kind, tag)]}: "
                        f"{'held called lost' if held else 'lost called kept'}"
                        + ("" if verdicts else " (not extracted)"))
                for name in ("all", group, ORDINALS[ordinal]):
                    tallies.setdefault(name, Tally()).add(held=held, said_lost=said_lost, miss=miss)
            carried = carry(result.to_dict())
    return tallies
