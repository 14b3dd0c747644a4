"""Round nine of the labelled set (issue 46): a held-out part written before any change of round nine.

`BLIND_16`, a mobile app's backend (Node.js, Redis, Kotlin workers) moved behind a new gateway: `redis-cli INFO
memory` (a human-readable size among its siblings), `npm audit`'s tally of vulnerabilities by severity, a Node.js
TypeError with its stack, `curl -w`'s timings in seconds (time to first byte among the other phases), `ls -l`'s size
of a build artefact in bytes, the HEAD commit of `git log --oneline`, and a drain timeout read from an ini file that
the user corrects in chat in other units; summarised in Portuguese prose, as a two-column markdown table, or as a
numbered list. No earlier part used these tools, outputs or summary styles. Its truth is written by hand below,
before any scorer ran on it; it is run once, at the end of round nine, and its figure is the estimate for a
benchmark never seen.

Lost renderings carry a neighbouring value (the peak for the used memory, the total for the first byte, the
previous commit for HEAD), swapped severities, a wrong unit, a tenfold size, a caller's line for the raising line,
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

def _redis_memory(n: int, phase: int, k: int) -> Planted:
    # redis-cli INFO memory: used_memory_human among the peak and the limit (Redis' "G" is GiB).
    used = 1.05 + (k % 80) / 100
    peak = used + 0.64
    c = _id(n, phase, "redis")
    host = f"cache-{k}.internal"
    items = [fcall(c, "exec_command", cmd=f"redis-cli -h {host} INFO memory | grep human"),
             fout(c, exec_out(0, f"used_memory_human:{used:.2f}G\nused_memory_rss_human:{used + 0.11:.2f}G\n"
                                 f"used_memory_peak_human:{peak:.2f}G\nmaxmemory_human:4.00G"))]
    mib = used * 1024
    return Planted("value", "used_memory_human", "redis memory", items, [
        ("verbatim", True, True, None),
        ("pt", True, False, Claim(f"redis {host}", f"{used:.2f} GiB em uso".replace(".", ","),
                                  f"O Redis em {host} usa {used:.2f} GiB de memória (used_memory_human)."
                                  .replace(f"{used:.2f}", f"{used:.2f}".replace(".", ",")))),
        ("MiB", True, False, Claim(f"redis {host}", f"used_memory {mib:.0f} MiB", f"O Redis em {host} ocupa "
                                   f"{mib:.0f} MiB (used_memory).")),
        ("peak as used", False, False, Claim(f"redis {host}", f"{peak:.2f} GiB em uso", f"O Redis em {host} usa "
                                             f"{peak:.2f} GiB de memória (used_memory_human).")),
        ("wrong unit", False, False, Claim(f"redis {host}", f"used_memory {used:.2f} MB", f"O Redis em {host} usa "
                                           f"{used:.2f} MB de memória.")),
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


def _curl_timing(n: int, phase: int, k: int) -> Planted:
    # curl -w: each phase's time in seconds since the start; time to first byte is the planted one.
    ttfb = 0.300 + (k % 90) / 1000 + 0.007
    total = ttfb + 0.031
    c = _id(n, phase, "curl")
    url = f"https://gw-{k}.example.net/v2/feed"
    items = [fcall(c, "exec_command", cmd="curl -s -o /dev/null -w 'dns=%{time_namelookup} "
                                          "connect=%{time_connect} tls=%{time_appconnect} "
                                          f"ttfb=%{{time_starttransfer}} total=%{{time_total}}\\n' {url}"),
             fout(c, exec_out(0, f"dns=0.004 connect=0.021 tls=0.087 ttfb={ttfb:.3f} total={total:.3f}"))]
    return Planted("value", f"{ttfb:.3f}", "curl timing", items, [
        ("verbatim", True, True, None),
        ("ms", True, False, Claim(f"gw-{k} /v2/feed", f"TTFB {ttfb * 1000:.0f} ms", f"Via gw-{k}, o /v2/feed "
                                  f"responde o primeiro byte em {ttfb * 1000:.0f} ms.")),
        ("pt seconds", True, False, Claim(f"gw-{k} /v2/feed", f"primeiro byte em {ttfb:.2f} s".replace(".", ","),
                                          f"Via gw-{k}, o primeiro byte do /v2/feed chega em "
                                          f"{ttfb:.2f}".replace(".", ",") + " s.")),
        ("total as ttfb", False, False, Claim(f"gw-{k} /v2/feed", f"TTFB {total * 1000:.0f} ms", f"Via gw-{k}, o "
                                              f"/v2/feed responde o primeiro byte em {total * 1000:.0f} ms.")),
        ("wrong unit", False, False, Claim(f"gw-{k} /v2/feed", f"TTFB {ttfb:.3f} ms", f"Via gw-{k}, o /v2/feed "
                                           f"responde o primeiro byte em {ttfb:.3f} ms.")),
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


def _head_commit(n: int, phase: int, k: int) -> Planted:
    # git log --oneline: the first line is HEAD; the second is the commit before it.
    head = f"{(0x3a1f00c + 7919 * k) & 0xFFFFFFF:07x}"
    prev = f"{(0x9be2047 + 104729 * k) & 0xFFFFFFF:07x}"
    c = _id(n, phase, "gitlog")
    items = [fcall(c, "exec_command", cmd=f"git -C apps/android-sync-{k} log --oneline -3"),
             fout(c, exec_out(0, f"{head} (HEAD -> release/{k}) Retry token refresh once\n"
                                 f"{prev} Bump okhttp to 4.12.0\n"
                                 f"{(0x51c7e2d + 31 * k) & 0xFFFFFFF:07x} Merge pull request #{400 + k}"))]
    return Planted("value", head, "head commit", items, [
        ("verbatim", True, True, None),
        ("pt", True, False, Claim(f"android-sync-{k}", f"HEAD {head} (retry do token)", f"O HEAD de "
                                  f"release/{k} em android-sync-{k} é {head}, que repete o refresh do token.")),
        ("message", True, False, Claim(f"android-sync-{k}", f"{head} \"Retry token refresh once\"", f"release/{k} "
                                       f"está em {head} (Retry token refresh once).")),
        ("previous as head", False, False, Claim(f"android-sync-{k}", f"HEAD {prev}", f"O HEAD de release/{k} em "
                                                 f"android-sync-{k} é {prev}.")),
        ("no hash", False, False, Claim(f"android-sync-{k}", "HEAD = retry do token", f"O HEAD de release/{k} "
                                        "repete o refresh do token.")),
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
    return [make(n, phase, k) for make in (_redis_memory, _npm_audit, _node_trace, _curl_timing, _artefact_size,
                                           _head_commit, _corrected_timeout)]


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


GROUPS = {BLIND_16: ("redis memory", "npm audit", "node trace", "curl timing", "artefact size", "head commit",
                     "corrected timeout")}
