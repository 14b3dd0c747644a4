"""Round ten of the labelled set (issue 46): a held-out part written before any change of round ten was scored.

`BLIND_17`, a reporting service (Python workers, MySQL, nginx in front) moved to a second region: `ping`'s summary
line (the average round trip among min/avg/max/mdev, slash-separated in one field), an nginx `limit_req_zone` rate
the user corrects in chat per minute rather than per second, `coverage report`'s TOTAL row (statements, missed and
the percentage on one line), `ps -o pid,rss`'s resident memory in KiB, and the MySQL client's "rows in set (N sec)"
timing; summarised in Dutch prose, as em-dash bullets or as one semicolon-separated line. Its truth is written by
hand below, before any scorer ran on it; it is run once, at the end of round ten, and its figure is the estimate
for a benchmark never seen.

How new it is, said plainly: none of `ping`, `limit_req`, `coverage`, `ps -o rss` or the MySQL client appears in an
earlier part (checked by searching the earlier sets); two families are of a kind seen before: the corrected rate is
a value read from a file and corrected in chat in other units like blind_16's timeout, and ping's average is a
number among others of one line like uptime's load averages. It was written after reading round nine's note on
blind_16 (its weak families) and before reading blind_16's misses.

Lost renderings carry a neighbouring value (ping's max for its average, the missed-lines count for the coverage,
the pid for the memory, the row count for the time), a wrong unit, the stale value of a corrected setting, or
nothing. Sessions are `labelled_set_round3.Session`s built like round seven's (a careful or sloppy summariser over
one to three compactions), so `labelled_set_round3.evaluate` counts them the same way.
"""

from __future__ import annotations

import random

from compaction_app.engine.items import user_message
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout
from tests.compaction_app.engine.retention.labelled_set_round3 import Session
from tests.compaction_app.engine.retention.labelled_set_round4 import Claim, Planted
from tests.compaction_app.engine.retention.labelled_set_round7 import build_session

BLIND_17 = "blind_17"
PARTS = (BLIND_17,)


def _id(n: int, phase: int, slot: str) -> str:
    return f"r10_{n}_{phase}_{slot}"


# ---------------------------------------------------------------------------------------------------------------
# BLIND_17: a reporting service moved to a second region (kept unread: run once, at the end of round ten)
# ---------------------------------------------------------------------------------------------------------------

def _ping_average(n: int, phase: int, k: int) -> Planted:
    # ping's last line: min/avg/max/mdev in one slash-separated field; the average is planted.
    low, avg, high = 8.113 + (k % 7) / 10, 14.2 + (k % 50) / 10 + 0.031, 31.4 + (k % 9)
    c = _id(n, phase, "ping")
    host = f"db-eu2-{k}.internal"
    items = [fcall(c, "exec_command", cmd=f"ping -c 20 {host}"),
             fout(c, exec_out(0, f"--- {host} ping statistics ---\n"
                                 "20 packets transmitted, 20 received, 0% packet loss, time 19027ms\n"
                                 f"rtt min/avg/max/mdev = {low:.3f}/{avg:.3f}/{high:.3f}/3.207 ms"))]
    nl = f"{avg:.1f}".replace(".", ",")
    return Planted("value", f"{avg:.3f}", "ping average", items, [
        ("verbatim", True, True, None),
        ("nl", True, False, Claim(f"ping {host}", f"gemiddeld {nl} ms", f"De gemiddelde rondreistijd naar {host} "
                                  f"is {nl} ms (ping, 20 pakketten).")),
        ("seconds", True, False, Claim(f"ping {host}", f"avg RTT {avg / 1000:.4f} s", f"{host}: average round trip "
                                       f"{avg / 1000:.4f} s.")),
        ("max as average", False, False, Claim(f"ping {host}", f"gemiddeld {high:.1f} ms".replace(".", ","),
                                               f"De gemiddelde rondreistijd naar {host} is "
                                               + f"{high:.1f}".replace(".", ",") + " ms.")),
        ("vague", False, False, Claim(f"ping {host}", "bereikbaar, geen verlies", f"{host} is bereikbaar zonder "
                                      "pakketverlies.")),
        ("dropped", False, False, None),
    ])


def _corrected_rate(n: int, phase: int, k: int) -> Planted:
    # nginx's request rate per client, read per second from the config, then corrected by the user per minute.
    zone = ("reports", "exports", "api")[phase]
    old, per_minute = 10, 600 + 300 * (k % 4)  # 600-1500 a minute: 10-25 a second, never 10 again
    per_second = per_minute // 60
    c = _id(n, phase, "nginx")
    items = [fcall(c, "exec_command", cmd=f"grep -rn limit_req_zone /etc/nginx/conf.d/edge-{k}.conf"),
             fout(c, exec_out(0, f"3:limit_req_zone $binary_remote_addr zone={zone}:10m rate={old}r/s;")),
             user_message(f"{old} a second throttles the nightly exports; on edge-{k} let the {zone} zone take "
                          f"{per_minute} requests a minute")]
    return Planted("value", f"zone={zone}", "corrected rate", items, [
        ("verbatim", True, True, None),
        ("per second", True, False, Claim(f"edge-{k} {zone} zone", f"rate={per_second}r/s", f"Op edge-{k} wordt de "
                                          f"limiet van zone {zone} {per_second}r/s (was {old}r/s).")),
        ("per minute", True, False, Claim(f"edge-{k} {zone} zone", f"{per_minute} req/min", f"edge-{k}: de zone "
                                          f"{zone} mag {per_minute} verzoeken per minuut (op verzoek van de "
                                          "gebruiker).")),
        ("stale", False, False, Claim(f"edge-{k} {zone} zone", f"rate={old}r/s", f"Op edge-{k} blijft de limiet "
                                      f"van zone {zone} {old}r/s.")),
        ("unit swapped", False, False, Claim(f"edge-{k} {zone} zone", f"{per_minute} req/s", f"edge-{k}: de zone "
                                             f"{zone} mag {per_minute} verzoeken per seconde.")),
        ("dropped", False, False, None),
    ])


def _coverage_total(n: int, phase: int, k: int) -> Planted:
    # coverage report's TOTAL row: statements, missed, and the percentage covered, on one line (the one module row
    # above it is at 99%, a percentage the total never reaches, so the tag names the total alone).
    stmts, missed = 4000 + 37 * (k % 60), 200 + 11 * (k % 30)  # at most 97% covered
    percent = round(100 * (stmts - missed) / stmts)
    c = _id(n, phase, "cov")
    pkg = f"reports_{k}"
    items = [fcall(c, "exec_command", cmd=f"coverage report --include='{pkg}/*'"),
             fout(c, exec_out(0, "Name                          Stmts   Miss  Cover\n"
                                 "-------------------------------------------------\n"
                                 f"{pkg}/render.py                 812      8    99%\n"
                                 "-------------------------------------------------\n"
                                 f"TOTAL                         {stmts}    {missed}    {percent}%"))]
    return Planted("value", f"{percent}%", "coverage total", items, [
        ("verbatim", True, True, None),
        ("nl", True, False, Claim(f"coverage {pkg}", f"{percent}% gedekt, {missed} regels niet", f"De tests van "
                                  f"{pkg} dekken {percent}% ({missed} van {stmts} statements niet).")),
        ("with statements", True, False, Claim(f"coverage {pkg}", f"{percent} % ({stmts} stmts)", f"{pkg}: coverage "
                                           f"{percent} % over {stmts} statements.")),
        ("missed as cover", False, False, Claim(f"coverage {pkg}", f"{missed}% gedekt", f"De tests van {pkg} dekken "
                                                f"{missed}%.")),
        ("wrong percent", False, False, Claim(f"coverage {pkg}", f"{percent - 9}% gedekt", f"De tests van {pkg} "
                                              f"dekken {percent - 9}%.")),
        ("dropped", False, False, None),
    ])


def _process_rss(n: int, phase: int, k: int) -> Planted:
    # ps -o pid,rss: the resident memory in KiB, a whole number of MiB; the pid is on the same line.
    mib = 300 + 13 * (k % 40)
    rss, pid = mib * 1024, 4100 + k
    c = _id(n, phase, "ps")
    items = [fcall(c, "exec_command", cmd=f"ps -o pid,rss,cmd -p {pid}"),
             fout(c, exec_out(0, f"    PID   RSS CMD\n   {pid} {rss} celery -A reports worker -Q render-{k}"))]
    return Planted("value", str(rss), "worker rss", items, [
        ("verbatim", True, True, None),
        ("MiB", True, False, Claim(f"render-{k} worker", f"RSS {mib} MiB", f"De render-{k} worker gebruikt {mib} "
                                   "MiB resident geheugen.")),
        ("KiB", True, False, Claim(f"render-{k} worker", f"rss {rss} KiB", f"render-{k} worker (pid {pid}): rss "
                                   f"{rss} KiB.")),
        ("pid as rss", False, False, Claim(f"render-{k} worker", f"RSS {pid} KiB", f"De render-{k} worker "
                                           f"gebruikt {pid} KiB resident geheugen.")),
        ("wrong unit", False, False, Claim(f"render-{k} worker", f"RSS {mib} KiB", f"De render-{k} worker gebruikt "
                                           f"{mib} KiB resident geheugen.")),
        ("dropped", False, False, None),
    ])


def _mysql_timing(n: int, phase: int, k: int) -> Planted:
    # The MySQL client's closing line: the rows returned and the query's time in seconds.
    rows, secs = 3 + k % 9, 1.5 + (k % 60) / 20 + 0.004
    c = _id(n, phase, "mysql")
    table = f"daily_rollup_{k}"
    items = [fcall(c, "exec_command", cmd=f"mysql -e 'SELECT region, SUM(total) FROM {table} GROUP BY region'"),
             fout(c, exec_out(0, "+--------+------------+\n| region | SUM(total) |\n+--------+------------+\n"
                                 "| eu1    |     912311 |\n| eu2    |     104522 |\n+--------+------------+\n"
                                 f"{rows} rows in set ({secs:.2f} sec)"))]
    return Planted("value", f"{secs:.2f}", "mysql timing", items, [
        ("verbatim", True, True, None),
        ("ms", True, False, Claim(f"query {table}", f"{secs * 1000:.0f} ms", f"De aggregatie op {table} duurt "
                                  f"{secs * 1000:.0f} ms.")),
        ("nl seconds", True, False, Claim(f"query {table}", f"{secs:.2f} s".replace(".", ","), f"De aggregatie op "
                                          f"{table} duurt " + f"{secs:.2f}".replace(".", ",") + " seconden.")),
        ("rows as time", False, False, Claim(f"query {table}", f"{rows} s", f"De aggregatie op {table} duurt "
                                             f"{rows} seconden.")),
        ("ms as s", False, False, Claim(f"query {table}", f"{secs:.2f} ms", f"De aggregatie op {table} duurt "
                                        f"{secs:.2f} ms.")),
        ("dropped", False, False, None),
    ])


def _blind_17(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    return [make(n, phase, k) for make in (_ping_average, _corrected_rate, _coverage_total, _process_rss,
                                           _mysql_timing)]


# ---------------------------------------------------------------------------------------------------------------
# Summary styles: Dutch prose, em-dash bullets, one semicolon-separated line
# ---------------------------------------------------------------------------------------------------------------

STYLES = {BLIND_17: ("nl", "dash", "line")}


def render(style: str, claims: list[tuple[str, Claim]]) -> str:
    if not claims:
        return "nog niets"
    if style == "nl":  # Dutch prose: one paragraph, the claims as sentences
        return "Samenvatting tot nu toe. " + " ".join(c.sentence for _, c in claims)
    if style == "dash":  # em-dash bullets, label then value
        return "State:\n" + "\n".join(f"— {c.label} — {c.value}" for _, c in claims)
    return "so far: " + "; ".join(f"{c.label} = {c.value}" for _, c in claims)


# ---------------------------------------------------------------------------------------------------------------
# Sessions: a careful or sloppy summariser, one to three compactions (as round seven's)
# ---------------------------------------------------------------------------------------------------------------

def _build(n: int, part: str, rng: random.Random) -> Session:
    goal = f"Move reporting stack {n} to the second region without slowing the nightly exports."
    return build_session(n, part, rng, make=_blind_17, goal=goal, phases=1 + (n * 5) % 3, styles=STYLES[part],
                         render=render)


def sessions(part: str = BLIND_17, count: int = 40, seed: int = 1017) -> list[Session]:
    rng = random.Random(f"{seed}-{part}")
    return [_build(n, part, rng) for n in range(1, count + 1)]


GROUPS = {BLIND_17: ("ping average", "corrected rate", "coverage total", "worker rss", "mysql timing")}
