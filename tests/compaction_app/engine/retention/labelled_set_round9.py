"""Round nine of the labelled set (issue 46): a held-out part written before any change of round nine was scored on it.

`BLIND_16`, a mobile app's backend (Node.js, Kotlin workers) moved behind a new gateway: `free -h` (the available
memory among the Mem row's other columns), `npm audit`'s tally of vulnerabilities by severity, a Node.js TypeError
with its stack, `wrk`'s requests per second under its latency table, `ls -l`'s size of a build artefact in bytes,
`uptime`'s three unlabelled load averages, and a drain timeout read from an ini file that the user corrects in chat
in other units; summarised in Portuguese prose, as a two-column markdown table, or as a numbered list. Its truth is
written by hand below, before any scorer ran on it; it is run once, at the end of round nine, and its figure is the
estimate for a benchmark never seen.

How new it is, said plainly: the first version of this file (06f1f45) had `redis-cli INFO memory`, `curl -w` and
`git log --oneline`, which earlier parts already used (blind_9, blind_3); they were replaced by `free -h`, `wrk` and
`uptime` before any run. The tools and outputs above appear in no earlier part, but two families are of a kind seen
before: npm audit's tally is a line of counts like blind_15's `terraform plan`, and the corrected timeout is a value
read from a file and corrected in chat like blind_15's (here in other units). The part was written after reading the
last stop's note on blind_15 (its families and how they failed) and before reading its misses.

Lost renderings carry a neighbouring value (free for available memory, one thread's rate for the total, the 1-minute
load for the 15-minute one), swapped severities, a wrong unit, a tenfold size, a caller's line for the raising line,
the stale value of a corrected setting, or nothing. Sessions are `labelled_set_round3.Session`s built like round
seven's (a careful or sloppy summariser over one to three compactions), so `labelled_set_round3.evaluate` counts
them the same way.
"""

from __future__ import annotations

import random

from compaction_app.engine.items import user_message
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout
from tests.compaction_app.engine.retention.labelled_set_round3 import Session
from tests.compaction_app.engine.retention.labelled_set_round4 import Claim, Planted
from tests.compaction_app.engine.retention.labelled_set_round7 import build_session

BLIND_16 = "blind_16"
PARTS = (BLIND_16,)


def _id(n: int, phase: int, slot: str) -> str:
    return f"r9_{n}_{phase}_{slot}"


# ---------------------------------------------------------------------------------------------------------------
# BLIND_16: a mobile app's backend moved behind a new gateway (kept unread: run once, at the end of round nine)
# ---------------------------------------------------------------------------------------------------------------

def _free_memory(n: int, phase: int, k: int) -> Planted:
    # free -h: the memory still available, in the Mem row among total, used, free and cache (free's "Gi" is GiB).
    avail = 3.1 + (k % 40) / 10  # 3.1-7.0: no other cell of the output is in this range
    c = _id(n, phase, "free")
    host = f"app-{k}.internal"
    items = [fcall(c, "exec_command", cmd=f"ssh {host} free -h"),
             fout(c, exec_out(0, "               total        used        free      shared  buff/cache   available\n"
                                 "Mem:            15Gi       2.4Gi       0.9Gi       312Mi        11Gi       "
                                 f"{avail:.1f}Gi\n"
                                 "Swap:          2.0Gi          0B       2.0Gi"))]
    comma = f"{avail:.1f}".replace(".", ",")
    return Planted("value", f"{avail:.1f}Gi", "free memory", items, [
        ("verbatim", True, True, None),
        ("pt", True, False, Claim(f"memória {host}", f"{comma} GiB disponíveis", f"O {host} ainda tem {comma} GiB "
                                  "de memória disponível (free -h).")),
        ("MiB", True, False, Claim(f"memória {host}", f"available ~{avail * 1024:.0f} MiB", f"{host}: about "
                                   f"{avail * 1024:.0f} MiB available.")),
        ("free as available", False, False, Claim(f"memória {host}", "0,9 GiB disponíveis", f"O {host} ainda tem "
                                                  "0,9 GiB de memória disponível (free -h).")),
        ("wrong unit", False, False, Claim(f"memória {host}", f"{comma} MiB disponíveis", f"O {host} ainda tem "
                                           f"{comma} MiB de memória disponível.")),
        ("dropped", False, False, None),
    ])


def _npm_audit(n: int, phase: int, k: int) -> Planted:
    # npm audit's closing tally: the total and the count per severity.
    low, moderate, high = 1 + k % 4, 5 + k % 6, 2 + k % 3  # moderate is never equal to low or high
    total = low + moderate + high
    c = _id(n, phase, "audit")
    app = f"mobile-api-{k}"
    items = [fcall(c, "exec_command", cmd=f"cd services/{app} && npm audit --omit=dev"),
             fout(c, exec_out(1, "# npm audit report\n\njsonwebtoken  <9.0.0\nSeverity: high\n"
                                 "fix available via `npm audit fix --force`\nnode_modules/jsonwebtoken\n\n"
                                 f"{total} vulnerabilities ({low} low, {moderate} moderate, {high} high)\n\n"
                                 "To address all issues, run:\n  npm audit fix --force"))]
    return Planted("value", f"{moderate} moderate", "npm audit", items, [
        ("verbatim", True, True, None),
        ("pt", True, False, Claim(f"npm audit {app}", f"{total} vulnerabilidades: {low} baixas, {moderate} "
                                  f"moderadas, {high} altas", f"O npm audit de {app} encontrou {total} "
                                  f"vulnerabilidades: {low} baixas, {moderate} moderadas e {high} altas.")),
        ("short", True, False, Claim(f"npm audit {app}", f"{total} vulns ({low} low / {moderate} moderate / {high} "
                                     f"high)", f"{app}: npm audit reports {total} vulns, {low} low, {moderate} "
                                     f"moderate, {high} high.")),
        ("swapped", False, False, Claim(f"npm audit {app}", f"{total} vulns ({low} low / {high} moderate / "
                                        f"{moderate} high)", f"O npm audit de {app} encontrou {total} "
                                        f"vulnerabilidades: {low} baixas, {high} moderadas e {moderate} altas.")),
        ("total only", False, False, Claim(f"npm audit {app}", f"{total} vulnerabilidades", f"O npm audit de {app} "
                                           f"encontrou {total} vulnerabilidades.")),
        ("dropped", False, False, None),
    ])


def _node_trace(n: int, phase: int, k: int) -> Planted:
    # A Node.js TypeError: the innermost frame of the app's code is the place; the route handler is its caller.
    line, col, caller = 40 + k % 150, 5 + k % 20, 12 + k % 40
    c = _id(n, phase, "node")
    items = [fcall(c, "exec_command", cmd=f"node scripts/replay-login.js --user {k}"),
             fout(c, exec_out(1, f"/app/src/auth/session.js:{line}\n    const t = ctx.claims.token;\n"
                                 "                         ^\n\n"
                                 "TypeError: Cannot read properties of undefined (reading 'token')\n"
                                 f"    at refreshSession (/app/src/auth/session.js:{line}:{col})\n"
                                 f"    at async loginHandler (/app/src/routes/login.js:{caller}:5)\n"
                                 "    at async /app/node_modules/express/lib/router/layer.js:95:5\n\n"
                                 "Node.js v20.11.1"))]
    return Planted("error", f"session.js:{line}", "node trace", items, [
        ("verbatim", True, True, None),
        ("pt", True, False, Claim(f"replay-login user {k}", f"TypeError em session.js:{line} (token indefinido)",
                                  f"O replay do login do usuário {k} falha com TypeError em "
                                  f"src/auth/session.js:{line}: claims é undefined ao ler token.")),
        ("function", True, False, Claim(f"replay-login user {k}", f"refreshSession, session.js linha {line}: "
                                        "TypeError", f"A falha do usuário {k} vem de refreshSession na linha {line} "
                                        "de src/auth/session.js (TypeError, token).")),
        ("caller as place", False, False, Claim(f"replay-login user {k}", f"TypeError em login.js:{caller}",
                                                f"O replay do login do usuário {k} falha com TypeError em "
                                                f"src/routes/login.js:{caller}.")),
        ("generic", False, False, Claim(f"replay-login user {k}", "login quebra", f"O replay do login do usuário "
                                        f"{k} quebra.")),
        ("dropped", False, False, None),
    ])


def _wrk_rate(n: int, phase: int, k: int) -> Planted:
    # wrk: the requests per second under the latency table (the latency's average and spread are in ms).
    rps = 1200 + 7 * k + 0.27
    c = _id(n, phase, "wrk")
    url = f"http://gw-{k}.internal:8080/v2/feed"
    items = [fcall(c, "exec_command", cmd=f"wrk -t4 -c64 -d30s {url}"),
             fout(c, exec_out(0, f"Running 30s test @ {url}\n  4 threads and 64 connections\n"
                                 "  Thread Stats   Avg      Stdev     Max   +/- Stdev\n"
                                 "    Latency    34.12ms    9.87ms 212.40ms   81.02%\n"
                                 f"    Req/Sec   {rps / 4:.2f}     41.20   502.00     70.11%\n"
                                 f"  {int(rps * 30)} requests in 30.00s, 118.40MB read\n"
                                 f"Requests/sec:   {rps:.2f}\nTransfer/sec:      3.95MB"))]
    return Planted("value", f"{rps:.2f}", "wrk rate", items, [
        ("verbatim", True, True, None),
        ("rounded", True, False, Claim(f"gw-{k} /v2/feed", f"{rps:.0f} req/s (wrk, 64 conexões)", f"Sob o wrk, o "
                                       f"gw-{k} aguenta {rps:.0f} pedidos por segundo no /v2/feed.")),
        ("pt decimal", True, False, Claim(f"gw-{k} /v2/feed", f"{rps:.1f} pedidos/s".replace(".", ","),
                                          f"O gw-{k} serve " + f"{rps:.1f}".replace(".", ",") + " pedidos por "
                                          "segundo no /v2/feed.")),
        ("per thread as total", False, False, Claim(f"gw-{k} /v2/feed", f"{rps / 4:.0f} req/s", f"Sob o wrk, o "
                                                    f"gw-{k} aguenta {rps / 4:.0f} pedidos por segundo.")),
        ("no number", False, False, Claim(f"gw-{k} /v2/feed", "aguenta a carga", f"O gw-{k} aguenta a carga do "
                                          "wrk.")),
        ("dropped", False, False, None),
    ])


def _artefact_size(n: int, phase: int, k: int) -> Planted:
    # ls -l: an artefact's size in bytes, a whole number of MiB.
    mib = 40 + k % 30
    size = mib * 1048576
    c = _id(n, phase, "lsl")
    path = f"build/bundle-{k}.tar.gz"
    items = [fcall(c, "exec_command", cmd=f"ls -l {path}"),
             fout(c, exec_out(0, f"-rw-r--r-- 1 ci ci {size} Mar  3 10:12 {path}"))]
    return Planted("value", str(size), "artefact size", items, [
        ("verbatim", True, True, None),
        ("MiB", True, False, Claim(f"bundle-{k}.tar.gz", f"{mib} MiB", f"O pacote {path} tem {mib} MiB.")),
        ("MB", True, False, Claim(f"bundle-{k}.tar.gz", f"{size / 1e6:.1f} MB", f"O pacote {path} tem "
                                  f"{size / 1e6:.1f} MB.")),
        ("KiB", False, False, Claim(f"bundle-{k}.tar.gz", f"{mib} KiB", f"O pacote {path} tem {mib} KiB.")),
        ("tenfold", False, False, Claim(f"bundle-{k}.tar.gz", f"{mib * 10} MiB", f"O pacote {path} tem "
                                        f"{mib * 10} MiB.")),
        ("dropped", False, False, None),
    ])


def _load_average(n: int, phase: int, k: int) -> Planted:
    # uptime: three load averages without labels, over 1, 5 and 15 minutes; the 15-minute one is planted.
    one, five, fifteen = 4.2 + (k % 30) / 10 + 0.01, 3.1 + (k % 20) / 10 + 0.02, 1.5 + (k % 25) / 100
    c = _id(n, phase, "uptime")
    host = f"kotlin-worker-{k}"
    items = [fcall(c, "exec_command", cmd=f"ssh {host} uptime"),
             fout(c, exec_out(0, f" 10:12:31 up 41 days,  3:07,  2 users,  load average: {one:.2f}, {five:.2f}, "
                                 f"{fifteen:.2f}"))]
    return Planted("value", f"{fifteen:.2f}", "load average", items, [
        ("verbatim", True, True, None),
        ("pt", True, False, Claim(host, f"carga 15 min {fifteen:.2f}".replace(".", ","), f"No {host}, a carga "
                                  "média dos últimos 15 minutos é " + f"{fifteen:.2f}".replace(".", ",") + ".")),
        ("all three", True, False, Claim(host, f"load {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min)",
                                         f"{host} shows load averages {one:.2f}, {five:.2f} and {fifteen:.2f} over "
                                         "1, 5 and 15 minutes.")),
        ("1-minute as 15", False, False, Claim(host, f"carga 15 min {one:.2f}".replace(".", ","), f"No {host}, a "
                                               "carga média dos últimos 15 minutos é " + f"{one:.2f}"
                                               .replace(".", ",") + ".")),
        ("vague", False, False, Claim(host, "carga alta", f"O {host} está com carga alta.")),
        ("dropped", False, False, None),
    ])


def _corrected_timeout(n: int, phase: int, k: int) -> Planted:
    # A timeout read from an ini file in minutes, then corrected by the user in chat in other words.
    key = ("drain_timeout", "grace_period", "idle_cutoff")[phase]
    old, new = 45, 60 + 15 * (k % 5)
    c = _id(n, phase, "ini")
    items = [fcall(c, "exec_command", cmd=f"grep -n timeout\\|period\\|cutoff config/worker-{k}.ini"),
             fout(c, exec_out(0, f"7:connect_timeout = 10s\n12:{key} = {old}m")),
             user_message(f"{old} minutes is too short for the big queues, make {key} on worker-{k} {new} minutes "
                          "from now on")]
    hours = f"{new / 60:g}".replace(".", ",")
    return Planted("value", key, "corrected timeout", items, [
        ("verbatim", True, True, None),
        ("pt hours", True, False, Claim(f"worker-{k} {key}", f"{hours} h (antes {old} min)", f"No worker-{k}, "
                                        f"{key} passa a {hours} h a pedido do usuário (antes eram {old} min).")),
        ("minutes", True, False, Claim(f"worker-{k}", f"{key} = {new}m", f"worker-{k}: {key} = {new}m.")),
        ("stale", False, False, Claim(f"worker-{k}", f"{key} = {old}m", f"worker-{k}: {key} = {old}m.")),
        ("no value", False, False, Claim(f"worker-{k} {key}", "alterado pelo usuário", f"O usuário mudou {key} "
                                         f"no worker-{k}.")),
        ("dropped", False, False, None),
    ])


def _blind_16(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    return [make(n, phase, k) for make in (_free_memory, _npm_audit, _node_trace, _wrk_rate, _artefact_size,
                                           _load_average, _corrected_timeout)]


# ---------------------------------------------------------------------------------------------------------------
# Summary styles: Portuguese prose, a two-column markdown table, a numbered list
# ---------------------------------------------------------------------------------------------------------------

STYLES = {BLIND_16: ("pt", "table", "numbered")}


def render(style: str, claims: list[tuple[str, Claim]]) -> str:
    if not claims:
        return "nada ainda"
    if style == "pt":  # Portuguese prose: one paragraph, the claims as sentences
        return "Resumo da sessão até aqui. " + " ".join(c.sentence for _, c in claims)
    if style == "table":  # a two-column markdown table
        return "| item | estado |\n|---|---|\n" + "\n".join(f"| {c.label} | {c.value} |" for _, c in claims)
    return "Where things stand:\n" + "\n".join(f"{i}) {c.label} -> {c.value}" for i, (_, c) in
                                                enumerate(claims, start=1))


# ---------------------------------------------------------------------------------------------------------------
# Sessions: a careful or sloppy summariser, one to three compactions (as round seven's)
# ---------------------------------------------------------------------------------------------------------------

def _build(n: int, part: str, rng: random.Random) -> Session:
    goal = f"Put mobile backend {n} behind the new gateway without logging anyone out."
    return build_session(n, part, rng, make=_blind_16, goal=goal, phases=1 + (n * 4) % 3, styles=STYLES[part],
                         render=render)


def sessions(part: str = BLIND_16, count: int = 40, seed: int = 469) -> list[Session]:
    rng = random.Random(f"{seed}-{part}")
    return [_build(n, part, rng) for n in range(1, count + 1)]


GROUPS = {BLIND_16: ("free memory", "npm audit", "node trace", "wrk rate", "artefact size", "load average",
                     "corrected timeout")}
