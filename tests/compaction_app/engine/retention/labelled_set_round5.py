"""Round five of the labelled set (issue 46): two held-out parts written before the scorer's value layer, never
tuned on.

Rounds three and four plant facts the scorer was then fixed on, so their *now* figures are tuned ones. These two
parts were written first, their truth by hand, and run once on the scorer of their time (the first run, recorded in
docs/benchmarks.md) before any change to it; they are kept out of every rule's design. They plant stated values of
kinds and shapes the earlier parts lack, in sessions of other languages and tools:

- `BLIND_6`, a Go and Rust service moved to a new cluster: a duration in a Helm values file (YAML, nested), an
  nginx directive (`name value;`, no `=` or `:`), a certificate's expiry date (`notAfter=Mar 14 09:30:00 2027
  GMT`), a Rust compiler error code (`error[E0502]`), a toolchain version in a tool's own words (`openjdk version
  "21.0.4"`, `go1.22.7`, `psql (PostgreSQL) 16.3`), a file renamed with `git mv`, a logfmt error line (`code=...`);
- `BLIND_7`, a data pipeline: a `df -h` table (sizes and a percentage by mount point), a missing file in a Python
  traceback (a quoted path with a date folder), a training log whose metric changes every epoch (only the last
  counts), a compose variable changed by a patch, a redirect URL with a port, an elapsed time in a log line
  (`elapsed=1h12m09s`).

Summaries render each claim in other units, formats and words (45 s as 45000 ms, 25m as 25 MiB, Mar 14 2027 as
2027-03-14, 0.9131 as 91.31%, 1h12m09s as 72 min), in styles the earlier parts lack: a handoff note with bold
labels, arrows (`label -> value`), a status report with a metrics table, INI-like `label = value` lines. Lost
renderings carry a wrong unit, a neighbouring value, a stale value, an earlier epoch's value, the subject without
its value, or nothing. Sessions are `labelled_set_round3.Session`s, built like round four's (a careful or sloppy
summariser over one to three compactions), so `labelled_set_round3.evaluate` counts them the same way.
"""

from __future__ import annotations

import json
import random

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from tests.compaction_app.engine.retention.labelled_set import AGENTS, assistant, exec_out, fcall, fout
from tests.compaction_app.engine.retention.labelled_set_round3 import Session, Step
from tests.compaction_app.engine.retention.labelled_set_round4 import (
    TEMPERAMENTS,
    Claim,
    Planted,
    _first_mode,
)

BLIND_6 = "blind_6"
BLIND_7 = "blind_7"
# Written after blind_6 and blind_7 had been run on the value layer, before any look at what it missed on them.
BLIND_8 = "blind_8"
# Written after blind_8's one run had shown the value layer did not carry over (29% recall), before the changes
# that run prompted; run once after them.
BLIND_9 = "blind_9"
# Written after blind_9's one run, before the change that followed it (values compared by their normal form inside
# every fact, not only settings); run once after it.
BLIND_10 = "blind_10"
# Written after blind_10's one run, before its misses were read and fixed; run once after that.
BLIND_11 = "blind_11"
PARTS = (BLIND_6, BLIND_7, BLIND_8, BLIND_9, BLIND_10, BLIND_11)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
               "November", "December")


def _id(n: int, phase: int, slot: str) -> str:
    return f"r5_{n}_{phase}_{slot}"


# ---------------------------------------------------------------------------------------------------------------
# BLIND_6: a Go and Rust service moved to a new cluster
# ---------------------------------------------------------------------------------------------------------------

def _blind_6(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # A duration in a Helm values file, nested two levels down.
    key = ("drain_timeout", "idle_timeout", "shutdown_grace")[phase]
    secs = 20 + k % 37
    c = _id(n, phase, "yaml")
    items = [fcall(c, "exec_command", cmd=f"cat deploy/ledger-{k}/values.yaml"),
             fout(c, exec_out(0, f"replicaCount: 3\nserver:\n  port: 8443\n  {key}: {secs}s\n  max_inflight: 64\n"
                                 f"image:\n  repository: registry.local/ledger\n  tag: \"1.{k}.0\"\n"))]
    spoken = key.replace("_", " ")
    out.append(Planted("value", key, "yaml duration", items, [
        ("verbatim", True, True, None),
        ("seconds", True, False, Claim(spoken, f"{secs} seconds", f"The {spoken} of ledger-{k} is {secs} seconds.")),
        ("ms", True, False, Claim(key, f"{secs * 1000} ms", f"ledger-{k} sets {key} to {secs * 1000} ms.")),
        ("wrong unit", False, False, Claim(key, f"{secs} ms", f"ledger-{k} sets {key} to {secs} ms.")),
        ("wrong value", False, False, Claim(key, f"{secs + 15}s", f"ledger-{k} sets {key} to {secs + 15}s.")),
        ("no value", False, False, Claim(key, "set in values.yaml", f"The {spoken} of ledger-{k} is set in "
                                         "values.yaml.")),
        ("dropped", False, False, None),
    ]))

    # An nginx directive: `name value;`, no `=` or `:`.
    c = _id(n, phase, "nginx")
    if phase == 0:
        directive, mb = "client_max_body_size", 8 + k % 40
        raw = f"{mb}m"
        held = [Claim("upload cap", f"{mb} MiB (client_max_body_size)", f"Uploads to ledger-{k} are capped at {mb} "
                      "MiB by client_max_body_size."),
                Claim(directive, f"{mb}M", f"nginx has {directive} {mb}M for ledger-{k}.")]
        lost = [Claim(directive, f"{mb}k", f"nginx has {directive} {mb}k for ledger-{k}."),
                Claim(directive, f"{mb * 10}m", f"nginx has {directive} {mb * 10}m for ledger-{k}.")]
    elif phase == 1:
        directive, minutes = "proxy_read_timeout", 2 + k % 5
        raw = f"{minutes * 60}s"
        held = [Claim(directive, f"{minutes} min", f"The nginx {directive} of ledger-{k} is {minutes} minutes."),
                Claim(directive, f"{minutes * 60}s", f"nginx waits {minutes * 60}s for ledger-{k} "
                      f"({directive}).")]
        lost = [Claim(directive, f"{minutes * 60} ms", f"The nginx {directive} of ledger-{k} is {minutes * 60} ms."),
                Claim(directive, f"{minutes} s", f"The nginx {directive} of ledger-{k} is {minutes} s.")]
    else:
        directive, count = "keepalive_requests", 1000 + k * 10
        raw = str(count)
        held = [Claim(directive, f"{count:,}", f"nginx allows {count:,} requests per keepalive connection "
                      f"({directive}) for ledger-{k}."),
                Claim(directive, str(count), f"{directive} is {count} for ledger-{k}.")]
        lost = [Claim(directive, str(count + 100), f"{directive} is {count + 100} for ledger-{k}.")]
    items = [fcall(c, "exec_command", cmd=f"grep -n {directive} /etc/nginx/conf.d/ledger-{k}.conf"),
             fout(c, exec_out(0, f"{14 + phase}:    {directive} {raw};"))]
    out.append(Planted("value", directive, "nginx directive", items, [
        ("verbatim", True, True, None),
        *((f"held {i}", True, False, claim) for i, claim in enumerate(held)),
        *((f"lost {i}", False, False, claim) for i, claim in enumerate(lost)),
        ("dropped", False, False, None),
    ]))

    # A certificate's expiry date.
    month, day, year = phase * 4 + k % 4, 10 + k % 18, 2027 + phase
    stamp = f"{MONTHS[month]} {day} 09:30:00 {year}"
    c = _id(n, phase, "cert")
    items = [fcall(c, "exec_command", cmd=f"openssl x509 -enddate -noout -in certs/api-{k}.pem"),
             fout(c, exec_out(0, f"notAfter={stamp} GMT"))]
    iso = f"{year}-{month + 1:02d}-{day:02d}"
    out.append(Planted("value", stamp, "expiry date", items, [
        ("verbatim", True, True, None),
        ("iso", True, False, Claim(f"certs/api-{k}.pem expires", iso, f"The certs/api-{k}.pem certificate expires "
                                   f"on {iso}.")),
        ("words", True, False, Claim(f"api-{k} cert valid until", f"{day} {MONTH_NAMES[month]} {year}",
                                     f"The api-{k} certificate is valid until {day} {MONTH_NAMES[month]} {year}.")),
        ("wrong month", False, False, Claim(f"certs/api-{k}.pem expires", f"{year}-{(month + 1) % 12 + 1:02d}-"
                                            f"{day:02d}", f"The certs/api-{k}.pem certificate expires on "
                                            f"{year}-{(month + 1) % 12 + 1:02d}-{day:02d}.")),
        ("wrong year", False, False, Claim(f"certs/api-{k}.pem expires", f"{year - 1}-{month + 1:02d}-{day:02d}",
                                           f"The certs/api-{k}.pem certificate expires on {year - 1}-"
                                           f"{month + 1:02d}-{day:02d}.")),
        ("no date", False, False, Claim(f"certs/api-{k}.pem", "checked", f"Checked the expiry of certs/api-{k}.pem.")),
        ("dropped", False, False, None),
    ]))

    # A Rust compiler error code.
    code, field_name = (("E0502", "entries"), ("E0382", "batch"), ("E0308", "amount"))[phase]
    line = 40 + k % 90
    where = f"crates/ledger-core/src/book_{k}.rs"
    message = {"E0502": f"cannot borrow `self.{field_name}` as mutable because it is also borrowed as immutable",
               "E0382": f"borrow of moved value: `{field_name}`",
               "E0308": "mismatched types"}[code]
    c = _id(n, phase, "cargo")
    items = [fcall(c, "exec_command", cmd="cargo build -p ledger-core"),
             fout(c, exec_out(101, f"   Compiling ledger-core v0.{k}.0 (/repo/crates/ledger-core)\n"
                                   f"error[{code}]: {message}\n  --> {where}:{line}:13\n   |\n"
                                   f"{line} |         let first = self.{field_name}.first();\n   |\n"
                                   f"error: could not compile `ledger-core` (lib) due to 1 previous error"))]
    out.append(Planted("error", code, "rust error code", items, [
        ("verbatim", True, True, None),
        ("code and place", True, False, Claim("cargo build", f"{code} at book_{k}.rs:{line} ({field_name})",
                                              f"cargo build fails with {code} on {field_name} in {where} line "
                                              f"{line}.")),
        ("code and message", True, False, Claim("cargo build", f"error {code}: {message} ({where}:{line})",
                                                f"The build stops at {code}, {message}, {where}:{line}.")),
        ("wrong code", False, False, Claim("cargo build", f"E0499 at book_{k}.rs:{line}", f"cargo build fails with "
                                           f"E0499 in {where} line {line}.")),
        ("generic", False, False, Claim("cargo build", "fails to compile", "ledger-core does not compile yet.")),
        ("dropped", False, False, None),
    ]))

    # A toolchain version in the tool's own words.
    c = _id(n, phase, "ver")
    if phase == 0:
        version = f"21.0.{1 + k % 8}"
        items = [fcall(c, "exec_command", cmd="java -version"),
                 fout(c, exec_out(0, f"openjdk version \"{version}\" 2024-07-16\nOpenJDK Runtime Environment "
                                     f"(build {version}+7-Ubuntu)\nOpenJDK 64-Bit Server VM (build {version}+7, "
                                     "mixed mode, sharing)"))]
        held = [Claim("JDK", version, f"The build box runs OpenJDK {version}."),
                Claim("java", f"openjdk {version}", f"java -version reports {version}.")]
        lost = [Claim("JDK", "21", "The build box runs OpenJDK 21."),
                Claim("JDK", f"21.0.{2 + k % 8}", f"The build box runs OpenJDK 21.0.{2 + k % 8}.")]
    elif phase == 1:
        version = f"1.22.{1 + k % 9}"
        items = [fcall(c, "exec_command", cmd="go version"), fout(c, exec_out(0, f"go version go{version} linux/amd64"))]
        held = [Claim("Go", version, f"The toolchain is Go {version}."),
                Claim("go", f"go{version} (linux/amd64)", f"go version says go{version}.")]
        lost = [Claim("Go", "1.22", "The toolchain is Go 1.22."),
                Claim("Go", f"1.21.{1 + k % 9}", f"The toolchain is Go 1.21.{1 + k % 9}.")]
    else:
        version = f"16.{1 + k % 9}"
        items = [fcall(c, "exec_command", cmd="psql --version"), fout(c, exec_out(0, f"psql (PostgreSQL) {version}"))]
        held = [Claim("psql", f"PostgreSQL {version}", f"The client is PostgreSQL {version}."),
                Claim("psql", f"v{version}", f"psql is v{version}.")]
        lost = [Claim("psql", f"PostgreSQL 15.{1 + k % 9}", f"The client is PostgreSQL 15.{1 + k % 9}."),
                Claim("psql", "PostgreSQL 16", "The client is PostgreSQL 16.")]
    out.append(Planted("value", version, "tool version", items, [
        ("verbatim", True, True, None),
        *((f"held {i}", True, False, claim) for i, claim in enumerate(held)),
        *((f"lost {i}", False, False, claim) for i, claim in enumerate(lost)),
        ("dropped", False, False, None),
    ]))

    # A file renamed with git mv: where it lives now.
    old, new = f"src/ledger/legacy_{k}.go", f"internal/ledger/book_{k}.go"
    c = _id(n, phase, "mv")
    items = [fcall(c, "exec_command", cmd=f"git mv {old} {new}"), fout(c, exec_out(0, "")),
             assistant(f"Moved the ledger code of shard {k}; the imports follow.")]
    out.append(Planted("command", new, "renamed path", items, [
        ("verbatim", True, True, None),
        ("moved", True, False, Claim("moved", f"{old} -> {new}", f"Moved {old} to {new} with git mv.")),
        ("renamed from", True, False, Claim("ledger code", f"{new} (renamed from {old})", f"The ledger code of "
                                            f"shard {k} is now {new}, renamed from {old}.")),
        ("stale", False, False, Claim("ledger code", old, f"The ledger code of shard {k} is in {old}.")),
        ("no target", False, False, Claim("moved", f"legacy_{k}.go renamed", f"Renamed legacy_{k}.go.")),
        ("dropped", False, False, None),
    ]))

    # A logfmt error line.
    order, reason = f"ord_{k}x9", ("card_declined", "expired_card", "processing_error")[phase]
    c = _id(n, phase, "logs")
    items = [fcall(c, "exec_command", cmd=f"kubectl logs deploy/ledger-{k} --since=10m | grep level=error"),
             fout(c, exec_out(0, f"ts=2026-12-01T10:{10 + phase}:07Z level=error msg=\"capture failed\" "
                                 f"order={order} code={reason} attempt=3"))]
    other = ("insufficient_funds", "card_declined", "expired_card")[phase]
    out.append(Planted("error", order, "logfmt error", items, [
        ("verbatim", True, True, None),
        ("paraphrase", True, False, Claim("capture", f"{order} failed: {reason}", f"Capturing {order} failed with "
                                          f"{reason} (3 attempts).")),
        ("wrong code", False, False, Claim("capture", f"{order} failed: {other}", f"Capturing {order} failed with "
                                           f"{other}.")),
        ("no code", False, False, Claim("capture", "one capture failed", "A payment capture failed in the logs.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# BLIND_7: a data pipeline
# ---------------------------------------------------------------------------------------------------------------

def _blind_7(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # A df -h table.
    used = 84 + k % 14
    avail = 500 * (100 - used) // 100
    mount = f"/data/ingest-{k}"
    c = _id(n, phase, "df")
    items = [fcall(c, "exec_command", cmd=f"df -h {mount}"),
             fout(c, exec_out(0, "Filesystem      Size  Used Avail Use% Mounted on\n"
                                 f"/dev/nvme1n1    500G  {500 - avail}G  {avail}G  {used}% {mount}"))]
    out.append(Planted("value", mount, "disk table", items, [
        ("verbatim", True, True, None),
        ("GiB", True, False, Claim(mount, f"{used}% used, {avail} GiB free", f"{mount} is {used}% full with "
                                   f"{avail} GiB left.")),
        ("G", True, False, Claim(mount, f"{avail}G avail ({used}%)", f"{mount}: {avail}G available, {used}% "
                                 "used.")),
        ("wrong percent", False, False, Claim(mount, f"{100 - used}% used, {avail} GiB free", f"{mount} is "
                                              f"{100 - used}% full with {avail} GiB left.")),
        ("wrong unit", False, False, Claim(mount, f"{used}% used, {avail} MiB free", f"{mount} is {used}% full with "
                                           f"{avail} MiB left.")),
        ("dropped", False, False, None),
    ]))

    # A missing file in a traceback: a quoted path with a date folder.
    day = 10 + k % 19
    path = f"data/raw/2026-11-{day}/batch_{k}.parquet"
    c = _id(n, phase, "tb")
    items = [fcall(c, "exec_command", cmd=f"python -m pipeline.ingest --day 2026-11-{day}"),
             fout(c, exec_out(1, "Traceback (most recent call last):\n  File \"pipeline/ingest.py\", line 88, in "
                                 "load\n    table = pq.read_table(path)\nFileNotFoundError: [Errno 2] No such file or "
                                 f"directory: '{path}'"))]
    out.append(Planted("error", f"batch_{k}.parquet", "missing file", items, [
        ("verbatim", True, True, None),
        ("paraphrase", True, False, Claim("ingest", f"{path} missing (FileNotFoundError)", f"The ingest of "
                                          f"2026-11-{day} stops: {path} does not exist.")),
        ("wrong day", False, False, Claim("ingest", f"data/raw/2026-11-{day + 1}/batch_{k}.parquet missing",
                                          f"The ingest stops: data/raw/2026-11-{day + 1}/batch_{k}.parquet does not "
                                          "exist.")),
        ("generic", False, False, Claim("ingest", "a parquet file is missing", "The ingest stops on a missing parquet "
                                        "file.")),
        ("dropped", False, False, None),
    ]))

    # A training log: the metric changes every epoch, only the last counts.
    metric = ("val_auc", "val_f1", "val_recall")[phase]
    last = 0.9 + (k % 90) / 1000 + 0.0001 * (1 + k % 9)
    values = [last - 0.0119, last - 0.0026, last]
    c = _id(n, phase, "train")
    lines = [f"epoch {e}/10 - loss {0.2214 - 0.006 * i:.4f} - {metric} {v:.4f}" for i, (e, v) in
             enumerate(zip((8, 9, 10), values, strict=True))]
    items = [fcall(c, "exec_command", cmd=f"tail -n 3 logs/train-{k}.log"), fout(c, exec_out(0, "\n".join(lines)))]
    out.append(Planted("value", metric, "epoch metric", items, [
        ("verbatim", True, True, None),
        ("final", True, False, Claim(metric, f"{last:.4f} after epoch 10", f"The model of run {k} ends at {metric} "
                                     f"{last:.4f} after 10 epochs.")),
        ("percent", True, False, Claim(metric, f"{last * 100:.2f}%", f"Run {k} finishes with {metric} at "
                                       f"{last * 100:.2f}%.")),
        ("earlier epoch", False, False, Claim(metric, f"{values[0]:.4f}", f"Run {k} reaches {metric} "
                                              f"{values[0]:.4f}.")),
        ("swapped digits", False, False, Claim(metric, f"{last + 0.0090:.4f}", f"Run {k} reaches {metric} "
                                               f"{last + 0.0090:.4f}.")),
        ("dropped", False, False, None),
    ]))

    # A compose variable, changed by a patch.
    var = ("WORKER_CONCURRENCY", "PREFETCH_MULTIPLIER", "BATCH_ROWS")[phase]
    old, new = 4 + k % 9, 16 + k % 9
    compose = f"docker-compose.ingest-{k}.yml"
    c, p = _id(n, phase, "env"), _id(n, phase, "patch")
    items = [fcall(c, "exec_command", cmd=f"grep -n {var} {compose}"),
             fout(c, exec_out(0, f"23:      {var}: \"{old}\"")),
             {"type": "custom_tool_call", "call_id": p, "name": "apply_patch",
              "input": f"*** Begin Patch\n*** Update File: {compose}\n@@\n-      {var}: \"{old}\"\n"
                       f"+      {var}: \"{new}\"\n*** End Patch\n"},
             {"type": "custom_tool_call_output", "call_id": p, "output": f"Success. Updated the following files:\n"
                                                                        f"M {compose}"}]
    out.append(Planted("value", var, "patched variable", items, [
        ("verbatim", True, True, None),
        ("now", True, False, Claim(var, f"{new} (was {old})", f"{var} in {compose} is {new} now, up from {old}.")),
        ("assignment", True, False, Claim(var, f"{var}={new}", f"{compose} sets {var}={new}.")),
        ("stale", False, False, Claim(var, str(old), f"{compose} sets {var} to {old}.")),
        ("dropped", False, False, None),
    ]))

    # A redirect URL with a port.
    host, port = f"ingest-{k}.internal", 8443 + phase
    url = f"https://{host}:{port}/healthz"
    c = _id(n, phase, "curl")
    items = [fcall(c, "exec_command", cmd=f"curl -sI http://{host}/healthz"),
             fout(c, exec_out(0, f"HTTP/1.1 301 Moved Permanently\nServer: nginx\nLocation: {url}\n"
                                 "Content-Length: 0"))]
    out.append(Planted("value", url, "redirect url", items, [
        ("verbatim", True, True, None),
        ("url", True, False, Claim("healthz", f"301 to {url}", f"http://{host}/healthz redirects (301) to {url}.")),
        ("no scheme", True, False, Claim("healthz", f"https on {host}:{port}/healthz", f"healthz moved to https, "
                                         f"{host}:{port}/healthz.")),
        ("no port", False, False, Claim("healthz", f"301 to https://{host}/healthz", f"healthz redirects to "
                                        f"https://{host}/healthz.")),
        ("wrong port", False, False, Claim("healthz", f"301 to https://{host}:{port + 1000}/healthz", f"healthz "
                                           f"redirects to https://{host}:{port + 1000}/healthz.")),
        ("dropped", False, False, None),
    ]))

    # An elapsed time in a log line.
    minutes, seconds = 5 + k % 50, 10 + k % 49
    elapsed = f"1h{minutes:02d}m{seconds:02d}s"
    rows = 18_000_000 + k * 1234
    c = _id(n, phase, "elapsed")
    items = [fcall(c, "exec_command", cmd=f"grep finished logs/ingest-{k}.log"),
             fout(c, exec_out(0, f"2026-12-02 03:17:44 INFO ingest finished rows={rows:,} elapsed={elapsed}"))]
    total = 60 + minutes
    out.append(Planted("value", elapsed, "elapsed time", items, [
        ("verbatim", True, True, None),
        ("minutes", True, False, Claim(f"ingest-{k} run time", f"about {total} min", f"The last ingest-{k} run took "
                                       f"about {total} minutes.")),
        ("h:mm:ss", True, False, Claim(f"ingest-{k} elapsed", f"1:{minutes:02d}:{seconds:02d}", f"ingest-{k} "
                                       f"finished in 1:{minutes:02d}:{seconds:02d}.")),
        ("wrong", False, False, Claim(f"ingest-{k} run time", f"about {minutes} min", f"The last ingest-{k} run "
                                     f"took about {minutes} minutes.")),
        ("no time", False, False, Claim(f"ingest-{k}", "finished", f"The last ingest-{k} run finished.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Summary styles
# ---------------------------------------------------------------------------------------------------------------

STYLES = {BLIND_6: ("handoff", "arrows"), BLIND_7: ("report", "ini")}


def render(style: str, claims: list[tuple[str, Claim]], rng: random.Random) -> str:
    if not claims:
        return "Nothing to hand over yet."
    if style == "handoff":
        return "Handoff note.\n\n" + "\n".join(f"**{c.label}** — {c.sentence}" for _, c in claims)
    if style == "arrows":
        return "\n".join(f"{c.label} -> {c.value}" for _, c in claims)
    if style == "report":
        prose = [c.sentence for g, c in claims if g in ("missing file", "patched variable")]
        table = [c for g, c in claims if g not in ("missing file", "patched variable")]
        out = ["Status: " + (" ".join(prose) if prose else "running.")]
        if table:
            out += ["", "| metric | value |", "|:--|--:|", *(f"| {c.label} | {c.value} |" for c in table)]
        return "\n".join(out)
    return "[state]\n" + "\n".join(f"{c.label.replace(' ', '_')} = {c.value}" for _, c in claims)


# ---------------------------------------------------------------------------------------------------------------
# Sessions: round four's way (a careful or sloppy summariser, one to three compactions)
# ---------------------------------------------------------------------------------------------------------------

def _build(n: int, part: str, rng: random.Random) -> Session:
    make = {BLIND_6: _blind_6, BLIND_7: _blind_7, BLIND_8: _blind_8, BLIND_9: _blind_9, BLIND_10: _blind_10,
            BLIND_11: _blind_11, BLIND_12: _blind_12}[part]
    style = rng.choice(STYLES[part])
    temperament = rng.choice(sorted(TEMPERAMENTS))
    session = Session(name=f"{part}-{n}-{temperament}", part=part, style=style)
    goal = user_message({BLIND_6: f"Move ledger {n} to the new cluster without downtime.",
                         BLIND_7: f"Make nightly ingest {n} finish under an hour again.",
                         BLIND_8: f"Get nightly report {n} green before the audit.",
                         BLIND_9: f"Find why the ledger app {n} got slow on mobile.",
                         BLIND_10: f"Take over the refunds monolith {n} from Dana.",
                         BLIND_11: f"Prepare the billing service {n} for the Black Friday peak.",
                         BLIND_12: f"Move checkout {n} to AWS before the spring sale."}[part])
    window: list[dict] = [AGENTS, goal]
    facts: dict[tuple[str, str], Planted] = {}
    state: dict[tuple[str, str], tuple[str, bool, bool, Claim | None]] = {}
    for phase in range(1 + (n * 5) % 3):
        new = make(n, phase)
        before = list(window)
        for fact in new:
            before += fact.items
        fresh = list(new)
        if phase and rng.random() < 0.4:  # the agent goes back to an earlier fact
            again = facts[rng.choice(sorted(facts))]
            before += again.items
            fresh.append(again)
        step = Step(before=before, after=[])
        for fact in fresh:
            key = (fact.kind, fact.tag)
            facts[key] = fact
            state[key] = _first_mode(fact, TEMPERAMENTS[temperament], rng)
        for key, (name, held, verbatim, _claim) in list(state.items()):
            if facts[key] in fresh:
                continue
            if held and rng.random() < 0.2:
                state[key] = (f"{name}, then dropped", False, False, None)
            elif held and (verbatim and rng.random() < 0.5 or not verbatim and rng.random() < 0.3):
                other = rng.choice([m for m in facts[key].modes if m[1] and not m[2]])
                state[key] = (f"{name}, then {other[0]}", True, False, other[3])
        claims: list[tuple[str, Claim]] = []
        kept: list[dict] = []
        for key, (name, held, verbatim, claim) in state.items():
            step.truth[key], step.labels[key], step.groups[key] = held, name, facts[key].group
            if verbatim:
                kept += facts[key].items
            if claim is not None:
                claims.append((facts[key].group, claim))
        rng.shuffle(claims)
        in_window = [item for item in before[2:] if any(item is k for k in kept)]
        seen: set[int] = set()
        in_window = [i for i in in_window if not (id(i) in seen or seen.add(id(i)))]
        text = (render_8(style, claims) if part in (BLIND_8, BLIND_9, BLIND_10, BLIND_11, BLIND_12)
                else render(style, claims, rng))
        summary = user_message(f"{SUMMARY_PREFIX}\n{text}")
        step.after = [AGENTS, goal, *in_window, summary]
        session.steps.append(step)
        window = step.after
    return session


def sessions(part: str = BLIND_6, count: int = 40, seed: int = 465) -> list[Session]:
    rng = random.Random(f"{seed}-{part}")
    return [_build(n, part, rng) for n in range(1, count + 1)]


GROUPS = {BLIND_6: ("yaml duration", "nginx directive", "expiry date", "rust error code", "tool version",
                    "renamed path", "logfmt error"),
          BLIND_7: ("disk table", "missing file", "epoch metric", "patched variable", "redirect url", "elapsed time"),
          BLIND_8: ("oracle error", "database url", "json seconds", "du size", "commit date", "row count",
                    "listening port"),
          BLIND_9: ("redis memory", "lb hostname", "node engines", "container memory", "curl timing",
                    "cron schedule"),
          BLIND_10: ("memory constraint", "deadline", "make variable", "k8s event", "cache location",
                     "csv amount"),
          BLIND_11: ("user budget", "postgres setting", "go test failure", "certificate serial", "latency table")}


# ---------------------------------------------------------------------------------------------------------------
# BLIND_8: a Java and Python back office, written after blind_6 and blind_7 had been run on the value layer and
# before any look at what it missed on them; run once at the end (the final held-out figure).
# ---------------------------------------------------------------------------------------------------------------


def _blind_8(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # An Oracle error code inside a Java exception.
    code = ("ORA-00942", "ORA-01017", "ORA-12541")[phase]
    text = {"ORA-00942": "table or view does not exist", "ORA-01017": "invalid username/password; logon denied",
            "ORA-12541": "TNS:no listener"}[code]
    c = _id(n, phase, "ora")
    items = [fcall(c, "exec_command", cmd=f"./gradlew :reports-{k}:test --tests '*Nightly*'"),
             fout(c, exec_out(1, f"> Task :reports-{k}:test\n\nNightlyReportTest > exportsLedger() FAILED\n"
                                 f"    java.sql.SQLSyntaxErrorException: {code}: {text}\n"
                                 f"        at oracle.jdbc.driver.T4CTTIoer11.processError(T4CTTIoer11.java:630)\n\n"
                                 "1 test completed, 1 failed\n\nFAILURE: Build failed with an exception."))]
    out.append(Planted("error", code, "oracle error", items, [
        ("verbatim", True, True, None),
        ("code", True, False, Claim(f"reports-{k} tests", f"{code} ({text})", f"The nightly report test of "
                                    f"reports-{k} fails with {code}: {text}.")),
        ("code only", True, False, Claim(f"reports-{k}", f"fails: {code}", f"reports-{k} test fails on {code}.")),
        ("wrong code", False, False, Claim(f"reports-{k} tests", "ORA-00904 (invalid identifier)", f"The nightly "
                                           f"report test of reports-{k} fails with ORA-00904.")),
        ("generic", False, False, Claim(f"reports-{k} tests", "a database error", f"The nightly report test of "
                                        f"reports-{k} fails on a database error.")),
        ("dropped", False, False, None),
    ]))

    # A connection URL in a TOML file, as a quoted string.
    host, port = f"db-{k}.internal", 5432 + phase
    c = _id(n, phase, "toml")
    items = [fcall(c, "exec_command", cmd=f"sed -n 1,12p services/reports-{k}/config.toml"),
             fout(c, exec_out(0, f"[database]\nurl = \"postgresql://reports@{host}:{port}/ledger\"\n"
                                 "pool = 10\n\n[http]\nbind = \"0.0.0.0\"\n"))]
    out.append(Planted("value", host, "database url", items, [
        ("verbatim", True, True, None),
        ("url", True, False, Claim("database", f"postgresql://reports@{host}:{port}/ledger", f"reports-{k} talks "
                                   f"to postgresql://reports@{host}:{port}/ledger.")),
        ("host and port", True, False, Claim("database", f"{host}:{port}, db ledger, user reports", f"The database "
                                             f"of reports-{k} is ledger on {host}:{port} (user reports).")),
        ("wrong port", False, False, Claim("database", f"{host}:{port + 100}/ledger", f"The database of "
                                           f"reports-{k} is on {host}:{port + 100}.")),
        ("dropped", False, False, None),
    ]))

    # A JSON API answer with a duration in seconds under a nested key.
    key = ("oldest_age_seconds", "lag_seconds", "max_wait_seconds")[phase]
    age = 60 * (30 + k % 90)
    c = _id(n, phase, "json")
    body = json.dumps({"queue": f"invoices-{k}", "stats": {"depth": 1200 + k, key: age}}, indent=2)
    items = [fcall(c, "exec_command", cmd=f"curl -s http://queue.internal/api/queues/invoices-{k}"),
             fout(c, exec_out(0, body))]
    out.append(Planted("value", key, "json seconds", items, [
        ("verbatim", True, True, None),
        ("minutes", True, False, Claim(f"invoices-{k} {key.split('_')[0]}", f"{age // 60} minutes",
                                       f"The {key.replace('_seconds', '').replace('_', ' ')} of queue invoices-{k} "
                                       f"is {age // 60} minutes.")),
        ("seconds", True, False, Claim(key, f"{age} s", f"invoices-{k}: {key} = {age}.")),
        ("wrong unit", False, False, Claim(f"invoices-{k} {key.split('_')[0]}", f"{age // 60} s",
                                           f"The {key.replace('_seconds', '').replace('_', ' ')} of queue "
                                           f"invoices-{k} is {age // 60} seconds.")),
        ("dropped", False, False, None),
    ]))

    # A size from du (value, tab, path).
    tenths = 12 + k % 60
    size = f"{tenths / 10:.1f}G"
    folder = f"build/artifacts-{k}"
    c = _id(n, phase, "du")
    items = [fcall(c, "exec_command", cmd=f"du -sh {folder}"), fout(c, exec_out(0, f"{size}\t{folder}"))]
    out.append(Planted("value", folder, "du size", items, [
        ("verbatim", True, True, None),
        ("GiB", True, False, Claim(folder, f"{tenths / 10:.1f} GiB", f"{folder} takes {tenths / 10:.1f} GiB.")),
        ("MiB", True, False, Claim(folder, f"~{round(tenths / 10 * 1024)} MiB", f"{folder} is about "
                                   f"{round(tenths / 10 * 1024)} MiB.")),
        ("wrong unit", False, False, Claim(folder, f"{tenths / 10:.1f} MiB", f"{folder} takes {tenths / 10:.1f} "
                                           "MiB.")),
        ("no size", False, False, Claim(folder, "large", f"{folder} is large.")),
        ("dropped", False, False, None),
    ]))

    # The date of the last commit (one line, no name).
    day = 10 + k % 19
    stamp = f"Nov {day} 16:02:{10 + phase:02d} 2026"
    c = _id(n, phase, "gitdate")
    items = [fcall(c, "exec_command", cmd=f"git log -1 --format=%cd -- services/reports-{k}"),
             fout(c, exec_out(0, f"Tue {stamp} +0100"))]
    out.append(Planted("value", stamp, "commit date", items, [
        ("verbatim", True, True, None),
        ("iso", True, False, Claim(f"reports-{k} last commit", f"2026-11-{day}", f"services/reports-{k} was last "
                                   f"changed on 2026-11-{day}.")),
        ("words", True, False, Claim(f"reports-{k} last commit", f"{day} November 2026", f"services/reports-{k} "
                                     f"last changed on {day} November 2026.")),
        ("wrong day", False, False, Claim(f"reports-{k} last commit", f"2026-11-{day - 1}", f"services/reports-{k} "
                                          f"was last changed on 2026-11-{day - 1}.")),
        ("dropped", False, False, None),
    ]))

    # A count from psql's table output.
    count = 40000 + k * 37
    c = _id(n, phase, "count")
    items = [fcall(c, "exec_command", cmd=f"psql -c 'select count(*) from ledger_{k}.entries where posted'"),
             fout(c, exec_out(0, f" count\n-------\n {count}\n(1 row)"))]
    out.append(Planted("value", str(count), "row count", items, [
        ("verbatim", True, True, None),
        ("separators", True, False, Claim(f"ledger_{k}.entries posted", f"{count:,}", f"ledger_{k}.entries has "
                                          f"{count:,} posted rows.")),
        ("rounded", True, False, Claim(f"ledger_{k}.entries posted", f"~{count / 1000:.1f}k", f"ledger_{k}.entries "
                                       f"has about {count / 1000:.1f}k posted rows.")),
        ("wrong", False, False, Claim(f"ledger_{k}.entries posted", f"{count + 900:,}", f"ledger_{k}.entries has "
                                      f"{count + 900:,} posted rows.")),
        ("dropped", False, False, None),
    ]))

    # A listening port in ss's table.
    port = 9000 + k
    c = _id(n, phase, "ss")
    items = [fcall(c, "exec_command", cmd="ss -ltnp"),
             fout(c, exec_out(0, "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
                                 f"LISTEN 0      2048   0.0.0.0:{port}     0.0.0.0:*     "
                                 f"users:((\"gunicorn\",pid={3000 + k},fd=5))"))]
    out.append(Planted("value", f"0.0.0.0:{port}", "listening port", items, [
        ("verbatim", True, True, None),
        ("address", True, False, Claim("gunicorn", f"listening on 0.0.0.0:{port}", f"gunicorn listens on "
                                       f"0.0.0.0:{port}.")),
        ("port", True, False, Claim("gunicorn port", str(port), f"gunicorn is on port {port}.")),
        ("wrong port", False, False, Claim("gunicorn port", str(port + 1), f"gunicorn is on port {port + 1}.")),
        ("dropped", False, False, None),
    ]))
    return out


STYLES[BLIND_8] = ("wrapped", "stand")


def _wrap(text: str, width: int = 72) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])


def render_8(style: str, claims: list[tuple[str, Claim]]) -> str:
    """A commit-message-like summary wrapped at 72 columns (a claim may run over two lines), or a German status
    note with the claims as label and value."""
    if not claims:
        return "Noch nichts."
    if style == "ticket":
        return "Status update (ticket)\n" + "\n".join(f"[{c.label}] {c.sentence}" for _, c in claims)
    if style == "email":
        return ("Hi team,\n\nwhere the refunds work stands:\n\n" + "\n".join(c.sentence for _, c in claims)
                + "\n\nBest,\nthe agent")
    if style == "outline":
        return "\n".join(f"{i}. {c.label}\n   - {c.value}" for i, (_, c) in enumerate(claims, 1))
    if style == "standup":
        half = (len(claims) + 1) // 2
        return ("Yesterday:\n" + "\n".join(f"  * {c.sentence}" for _, c in claims[:half]) + "\nToday:\n"
                + "\n".join(f"  * {c.sentence}" for _, c in claims[half:]))
    if style == "pr":  # a pull request's description
        return ("## Summary\n\nWork so far on the AWS move.\n\n## Findings\n\n"
                + "\n".join(f"- {c.sentence}" for _, c in claims) + "\n\n## Test plan\n\n- [ ] load test at peak")
    if style == "yaml":
        return "state:\n" + "\n".join(f"  - topic: {c.label}\n    value: \"{c.value}\"" for _, c in claims)
    if style == "csv":
        return "topic,value\n" + "\n".join(f"{c.label},\"{c.value}\"" for _, c in claims)
    if style == "wrapped":
        return "Nightly reports: state of the work\n\n" + "\n\n".join(_wrap(c.sentence) for _, c in claims)
    return "Stand der Arbeit:\n" + "\n".join(f"- {c.label}: {c.value}" for _, c in claims)


STYLES[BLIND_9] = ("standup", "csv")


def _blind_9(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # Redis's INFO, `key:value` with no space.
    key = ("used_memory_human", "used_memory_peak_human", "maxmemory_human")[phase]
    hundredths = 110 + k % 80
    gib = hundredths / 100
    c = _id(n, phase, "redis")
    items = [fcall(c, "exec_command", cmd=f"redis-cli -h cache-{k} INFO memory | grep {key}"),
             fout(c, exec_out(0, f"{key}:{gib:.2f}G"))]
    out.append(Planted("value", key, "redis memory", items, [
        ("verbatim", True, True, None),
        ("GiB", True, False, Claim(f"cache-{k} {key}", f"{gib:.2f} GiB", f"Redis on cache-{k} reports {key} "
                                   f"{gib:.2f} GiB.")),
        ("MiB", True, False, Claim(f"cache-{k} {key}", f"~{round(gib * 1024)} MiB", f"Redis on cache-{k}: {key} is "
                                   f"about {round(gib * 1024)} MiB.")),
        ("wrong unit", False, False, Claim(f"cache-{k} {key}", f"{gib:.2f} MiB", f"Redis on cache-{k} reports {key} "
                                           f"{gib:.2f} MiB.")),
        ("shifted", False, False, Claim(f"cache-{k} {key}", f"{gib * 10:.1f}G", f"Redis on cache-{k} reports {key} "
                                        f"{gib * 10:.1f}G.")),
        ("dropped", False, False, None),
    ]))

    # A load balancer's name, the only thing terraform printed.
    dns = f"ledger-lb-{k}-{1000000 + k * 7919}.eu-west-1.elb.amazonaws.com"
    c = _id(n, phase, "tf")
    items = [fcall(c, "exec_command", cmd=f"terraform -chdir=infra/env-{k} output -raw lb_dns_name"),
             fout(c, exec_out(0, dns))]
    out.append(Planted("value", dns, "lb hostname", items, [
        ("verbatim", True, True, None),
        ("name", True, False, Claim("load balancer", dns, f"The env-{k} load balancer answers at {dns}.")),
        ("neighbour", False, False, Claim("load balancer", dns.replace(f"-{k}-", f"-{k + 1}-"), f"The env-{k} load "
                                          f"balancer answers at {dns.replace(f'-{k}-', f'-{k + 1}-')}.")),
        ("dropped", False, False, None),
    ]))

    # The Node versions package.json accepts.
    low = f"18.{10 + k % 20}"
    spec = f">={low} <21"
    c = _id(n, phase, "engines")
    items = [fcall(c, "exec_command", cmd=f"node -p \"require('./apps/mobile-api-{k}/package.json').engines.node\""),
             fout(c, exec_out(0, spec))]
    out.append(Planted("value", f">={low}", "node engines", items, [
        ("verbatim", True, True, None),
        ("same", True, False, Claim(f"mobile-api-{k} engines.node", spec, f"mobile-api-{k} accepts Node {spec}.")),
        ("words", True, False, Claim(f"mobile-api-{k} node", f"{low} up to, not including, 21", f"mobile-api-{k} "
                                     f"runs on Node {low} or newer, below 21.")),
        ("major only", False, False, Claim(f"mobile-api-{k} engines.node", ">=18 <21", f"mobile-api-{k} accepts "
                                           "Node >=18 <21.")),
        ("no upper", False, False, Claim(f"mobile-api-{k} engines.node", f">={low}", f"mobile-api-{k} accepts Node "
                                         f">={low}.")),
        ("dropped", False, False, None),
    ]))

    # docker stats: a container's memory in a table whose header has spaces inside its columns.
    mem = 300 + k + 0.3
    c = _id(n, phase, "stats")
    items = [fcall(c, "exec_command", cmd=f"docker stats --no-stream api-{k}"),
             fout(c, exec_out(0, "CONTAINER ID   NAME      CPU %     MEM USAGE / LIMIT     MEM %     NET I/O\n"
                                 f"3f2a1b9c8d7e   api-{k}    12.50%    {mem:.1f}MiB / 1GiB    "
                                 f"{mem / 10.24:.2f}%    1.2MB / 800kB"))]
    out.append(Planted("value", f"{mem:.1f}MiB", "container memory", items, [
        ("verbatim", True, True, None),
        ("rounded", True, False, Claim(f"api-{k} memory", f"{round(mem)} MiB of 1 GiB", f"The api-{k} container "
                                       f"uses {round(mem)} MiB of its 1 GiB limit.")),
        ("GiB", True, False, Claim(f"api-{k} memory", f"{mem / 1024:.2f} GiB", f"api-{k} uses {mem / 1024:.2f} GiB.")),
        ("wrong unit", False, False, Claim(f"api-{k} memory", f"{mem:.1f} KiB", f"api-{k} uses {mem:.1f} KiB.")),
        ("dropped", False, False, None),
    ]))

    # curl's timing: seconds, said by curl's own variable names only.
    total = 0.4 + (k % 50) / 100 + 0.007
    c = _id(n, phase, "curl")
    items = [fcall(c, "exec_command", cmd=f"curl -o /dev/null -s -w 'connect=%{{time_connect}} "
                                          f"total=%{{time_total}}\\n' https://api-{k}.example/health"),
             fout(c, exec_out(0, f"connect=0.012 total={total:.3f}"))]
    out.append(Planted("value", f"total={total:.3f}", "curl timing", items, [
        ("verbatim", True, True, None),
        ("ms", True, False, Claim(f"api-{k} /health", f"{round(total * 1000)} ms total", f"A request to api-{k} "
                                  f"/health takes {round(total * 1000)} ms in total.")),
        ("s", True, False, Claim(f"api-{k} /health", f"{total:.3f} s total", f"api-{k} /health: {total:.3f} s "
                                 "total.")),
        ("wrong unit", False, False, Claim(f"api-{k} /health", f"{total:.3f} ms total", f"api-{k} /health: "
                                           f"{total:.3f} ms total.")),
        ("connect only", False, False, Claim(f"api-{k} /health", "connect 12 ms", f"api-{k} /health connects in "
                                             "12 ms.")),
        ("dropped", False, False, None),
    ]))

    # A cron schedule.
    minute, hour = 5 + k % 50, 1 + phase
    script = f"/opt/ledger/bin/nightly-{k}.sh"
    c = _id(n, phase, "cron")
    items = [fcall(c, "exec_command", cmd="crontab -l | grep nightly"),
             fout(c, exec_out(0, f"{minute} {hour} * * * {script} >> /var/log/nightly.log 2>&1"))]
    out.append(Planted("value", f"nightly-{k}.sh", "cron schedule", items, [
        ("verbatim", True, True, None),
        ("time", True, False, Claim(f"nightly-{k}.sh", f"daily at {hour:02d}:{minute:02d}", f"cron runs "
                                    f"nightly-{k}.sh every day at {hour:02d}:{minute:02d}.")),
        ("cron", True, False, Claim(f"nightly-{k}.sh", f"{minute} {hour} * * *", f"nightly-{k}.sh is scheduled "
                                    f"as `{minute} {hour} * * *`.")),
        ("swapped", False, False, Claim(f"nightly-{k}.sh", f"daily at {minute:02d}:{hour:02d}", f"cron runs "
                                        f"nightly-{k}.sh every day at {minute:02d}:{hour:02d}.")),
        ("no time", False, False, Claim(f"nightly-{k}.sh", "runs nightly", f"nightly-{k}.sh runs from cron.")),
        ("dropped", False, False, None),
    ]))
    return out


STYLES[BLIND_10] = ("email", "outline")


def _blind_10(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # A constraint with a quantity, said by the user.
    gb = 2 + k % 3
    message = f"Speed up refund export {k}. Export {k} must stay under {gb} GB of memory."
    out.append(Planted("constraint", f"export {k} must stay", "memory constraint", [user_message(message)], [
        ("verbatim", True, True, None),
        ("MB", True, False, Claim(f"export {k} memory", f"must stay below {gb * 1000} MB", f"Export {k} must stay "
                                  f"below {gb * 1000} MB of memory.")),
        ("words", True, False, Claim(f"export {k} memory", f"{gb} GB at most", f"Export {k} must never use more "
                                     f"than {gb} GB of memory.")),
        ("wrong unit", False, False, Claim(f"export {k} memory", f"must stay under {gb} MB", f"Export {k} must "
                                           f"stay under {gb} MB of memory.")),
        ("no limit", False, False, Claim(f"export {k} memory", "no limit", f"Export {k} may use as much memory "
                                         "as it needs.")),
        ("dropped", False, False, None),
    ]))

    # A deadline, said by the user.
    month, day = 1 + (k + phase) % 12, 10 + k % 18
    names = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    message = f"Then tenant {k}. Tenant {k} must be migrated by {names[month - 1]} {day}, 2027."
    iso = f"2027-{month:02d}-{day:02d}"
    out.append(Planted("constraint", f"tenant {k} must be migrated", "deadline", [user_message(message)], [
        ("verbatim", True, True, None),
        ("iso", True, False, Claim(f"tenant {k} deadline", iso, f"Tenant {k} must be migrated by {iso}.")),
        ("day first", True, False, Claim(f"tenant {k} deadline", f"{day} {MONTH_NAMES[month - 1]} 2027",
                                         f"Tenant {k} has to be migrated by {day} {MONTH_NAMES[month - 1]} 2027.")),
        ("wrong day", False, False, Claim(f"tenant {k} deadline", f"2027-{month:02d}-{day + 1:02d}",
                                          f"Tenant {k} must be migrated by 2027-{month:02d}-{day + 1:02d}.")),
        ("no date", False, False, Claim(f"tenant {k} deadline", "soon", f"Tenant {k} must be migrated soon.")),
        ("dropped", False, False, None),
    ]))

    # A Makefile variable, as `make -p` prints it.
    var = ("PARALLEL", "SHARDS", "RETRIES")[phase]
    value = 3 + k % 9
    c = _id(n, phase, "make")
    items = [fcall(c, "exec_command", cmd=f"make -pn -C services/refunds-{k} | grep '^{var} '"),
             fout(c, exec_out(0, f"{var} := {value}"))]
    out.append(Planted("value", var, "make variable", items, [
        ("verbatim", True, True, None),
        ("assignment", True, False, Claim(f"refunds-{k} Makefile", f"{var}={value}", f"The refunds-{k} Makefile sets "
                                          f"{var} to {value}.")),
        ("wrong", False, False, Claim(f"refunds-{k} Makefile", f"{var}={value + 2}", f"The refunds-{k} Makefile sets "
                                      f"{var} to {value + 2}.")),
        ("no value", False, False, Claim(f"refunds-{k} Makefile", f"{var} is set", f"The refunds-{k} Makefile sets "
                                         f"{var}.")),
        ("dropped", False, False, None),
    ]))

    # A Kubernetes event: a failure without the word error, in a table.
    pod = f"worker-{k}-x9z"
    c = _id(n, phase, "events")
    items = [fcall(c, "exec_command", cmd="kubectl get events -n refunds --field-selector reason=BackOff"),
             fout(c, exec_out(0, "LAST SEEN   TYPE      REASON    OBJECT              MESSAGE\n"
                                 f"2m          Warning   BackOff   pod/{pod}    Back-off restarting failed "
                                 f"container worker in pod {pod}_refunds"))]
    out.append(Planted("error", pod, "k8s event", items, [
        ("verbatim", True, True, None),
        ("paraphrase", True, False, Claim("kubernetes", f"{pod} in BackOff", f"Pod {pod} is in BackOff: its worker "
                                          "container keeps failing and restarting.")),
        ("wrong pod", False, False, Claim("kubernetes", f"worker-{k + 1}-x9z in BackOff", f"Pod worker-{k + 1}-x9z "
                                          "is in BackOff.")),
        ("generic", False, False, Claim("kubernetes", "a worker restarts", "A worker pod restarts now and then.")),
        ("dropped", False, False, None),
    ]))

    # A Python dict printed by the app's settings.
    location = f"redis://cache-{k}:6379/{1 + phase}"
    c = _id(n, phase, "caches")
    items = [fcall(c, "exec_command", cmd="python -c \"from django.conf import settings; "
                                          "print(settings.CACHES['default'])\""),
             fout(c, exec_out(0, "{'BACKEND': 'django_redis.cache.RedisCache', "
                                 f"'LOCATION': '{location}', 'TIMEOUT': 300}}"))]
    out.append(Planted("value", f"cache-{k}:6379/{1 + phase}", "cache location", items, [
        ("verbatim", True, True, None),
        ("url", True, False, Claim("default cache", location, f"Django's default cache is {location}.")),
        ("words", True, False, Claim("default cache", f"cache-{k}:6379, database {1 + phase}", f"The default cache "
                                     f"is Redis on cache-{k}:6379, database {1 + phase}.")),
        ("wrong db", False, False, Claim("default cache", f"redis://cache-{k}:6379/{5 + phase}", f"Django's default "
                                         f"cache is redis://cache-{k}:6379/{5 + phase}.")),
        ("dropped", False, False, None),
    ]))

    # A CSV report: the amount on the last day.
    amount = 9000 + k * 13 + 0.25
    c = _id(n, phase, "csv")
    items = [fcall(c, "exec_command", cmd=f"tail -n 2 reports/refunds_{k}.csv"),
             fout(c, exec_out(0, f"2026-11-30,412,{amount - 311:.2f}\n2026-12-01,388,{amount:.2f}"))]
    out.append(Planted("value", f"{amount:.2f}", "csv amount", items, [
        ("verbatim", True, True, None),
        ("separators", True, False, Claim(f"refunds_{k} on 2026-12-01", f"€{amount:,.2f} (388 refunds)",
                                          f"On 2026-12-01 report {k} shows 388 refunds worth €{amount:,.2f}.")),
        ("plain", True, False, Claim(f"refunds_{k} 2026-12-01", f"{amount:.2f} EUR", f"refunds_{k}.csv: "
                                     f"{amount:.2f} EUR refunded on 2026-12-01.")),
        ("wrong", False, False, Claim(f"refunds_{k} on 2026-12-01", f"€{amount + 90:,.2f}", f"On 2026-12-01 report "
                                      f"{k} shows refunds worth €{amount + 90:,.2f}.")),
        ("dropped", False, False, None),
    ]))
    return out


STYLES[BLIND_11] = ("ticket", "stand")


def _blind_11(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # A budget the user sets, in another currency format.
    euros = 1200 + k * 10
    message = f"Before the peak: billing {k}. The cloud bill for billing {k} has to stay below EUR {euros:,} a month."
    out.append(Planted("constraint", f"billing {k} has to stay", "user budget", [user_message(message)], [
        ("verbatim", True, True, None),
        ("symbol", True, False, Claim(f"billing {k} budget", f"< €{euros:,}/month", f"The cloud bill for billing {k} "
                                      f"has to stay below €{euros:,} a month.")),
        ("plain", True, False, Claim(f"billing {k} budget", f"max {euros} EUR per month", f"billing {k} must not "
                                     f"cost more than {euros} EUR per month in the cloud.")),
        ("wrong", False, False, Claim(f"billing {k} budget", f"< €{euros + 500:,}/month", f"The cloud bill for "
                                      f"billing {k} has to stay below €{euros + 500:,} a month.")),
        ("dropped", False, False, None),
    ]))

    # A PostgreSQL setting, as SHOW prints it.
    name = ("work_mem", "shared_buffers", "statement_timeout")[phase]
    raw, held, wrong = {
        "work_mem": (f"{16 + k % 48}MB", f"{(16 + k % 48) * 1024} kB", f"{16 + k % 48} kB"),
        "shared_buffers": (f"{2 + k % 6}GB", f"{(2 + k % 6) * 1024} MB", f"{2 + k % 6} MB"),
        "statement_timeout": (f"{30 + k % 30}s", f"{(30 + k % 30) * 1000} ms", f"{30 + k % 30} ms"),
    }[name]
    c = _id(n, phase, "show")
    items = [fcall(c, "exec_command", cmd=f"psql -h pg-{k} -c 'SHOW {name}'"),
             fout(c, exec_out(0, f" {name} \n{'-' * (len(name) + 2)}\n {raw}\n(1 row)"))]
    out.append(Planted("value", name, "postgres setting", items, [
        ("verbatim", True, True, None),
        ("same", True, False, Claim(f"pg-{k} {name}", raw, f"pg-{k} runs with {name} = {raw}.")),
        ("converted", True, False, Claim(f"pg-{k} {name}", held, f"On pg-{k}, {name} is {held}.")),
        ("wrong unit", False, False, Claim(f"pg-{k} {name}", wrong, f"On pg-{k}, {name} is {wrong}.")),
        ("dropped", False, False, None),
    ]))

    # A Go test failure: file and line, and the values compared.
    line, got, want = 40 + k % 60, 1990 + k, 2000 + k
    c = _id(n, phase, "gotest")
    items = [fcall(c, "exec_command", cmd=f"go test ./internal/invoice{k}/..."),
             fout(c, exec_out(1, f"--- FAIL: TestTotal (0.00s)\n    total_test.go:{line}: got {got}, want {want}\n"
                                 f"FAIL\nFAIL\texample.com/billing/internal/invoice{k}\t0.012s"))]
    out.append(Planted("error", f"total_test.go:{line}", "go test failure", items, [
        ("verbatim", True, True, None),
        ("words", True, False, Claim(f"invoice{k} tests", f"TestTotal fails at total_test.go line {line}: {got} "
                                     f"instead of {want}", f"TestTotal in internal/invoice{k} fails at "
                                     f"total_test.go:{line}, got {got} where {want} was expected.")),
        ("wrong line", False, False, Claim(f"invoice{k} tests", f"TestTotal fails at total_test.go:{line + 7}",
                                           f"TestTotal in internal/invoice{k} fails at total_test.go:{line + 7}.")),
        ("no line", False, False, Claim(f"invoice{k} tests", "TestTotal fails", f"TestTotal in internal/invoice{k} "
                                        "fails.")),
        ("dropped", False, False, None),
    ]))

    # A certificate's serial number (hex with colons) from openssl.
    serial = ":".join(f"{(k * 37 + i * 11) % 256:02X}" for i in range(8))
    c = _id(n, phase, "serial")
    items = [fcall(c, "exec_command", cmd=f"openssl x509 -serial -noout -in certs/billing-{k}.pem"),
             fout(c, exec_out(0, f"serial={serial.replace(':', '')}"))]
    out.append(Planted("value", serial.replace(":", ""), "certificate serial", items, [
        ("verbatim", True, True, None),
        ("colons", True, False, Claim(f"billing-{k} cert serial", serial.lower(), f"The billing-{k} certificate has "
                                      f"serial {serial.lower()}.")),
        ("plain", True, False, Claim(f"billing-{k} cert serial", serial.replace(":", ""), f"billing-{k}.pem: serial "
                                     f"{serial.replace(':', '')}.")),
        ("other cert", False, False, Claim(f"billing-{k} cert serial", serial.replace(":", "")[:-2] + "00",
                                           f"billing-{k}.pem: serial {serial.replace(':', '')[:-2]}00.")),
        ("dropped", False, False, None),
    ]))

    # A latency table from a load test (percentiles as columns).
    p50, p99 = 20 + k % 30, 300 + k * 3
    c = _id(n, phase, "vegeta")
    items = [fcall(c, "exec_command", cmd=f"vegeta report results-{k}.bin"),
             fout(c, exec_out(0, "Requests      [total, rate, throughput]  6000, 100.02, 99.87\n"
                                 f"Latencies     [min, mean, 50, 90, 95, 99, max]  3.1ms, 41.2ms, {p50}.4ms, 88.0ms, "
                                 f"120.5ms, {p99}.9ms, 1.2s\nSuccess       [ratio]  99.95%"))]
    out.append(Planted("value", f"{p99}.9ms", "latency table", items, [
        ("verbatim", True, True, None),
        ("p99", True, False, Claim(f"results-{k} p99", f"{p99 + 1} ms", f"In results-{k} the p99 latency is about "
                                   f"{p99 + 1} ms.")),
        ("seconds", True, False, Claim(f"results-{k} p99", f"{(p99 + 0.9) / 1000:.3f} s", f"results-{k}: p99 "
                                       f"{(p99 + 0.9) / 1000:.3f} s.")),
        ("p50 as p99", False, False, Claim(f"results-{k} p99", f"{p50}.4 ms", f"In results-{k} the p99 latency is "
                                           f"{p50}.4 ms.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# BLIND_12: a TypeScript and Python shop moving checkout to AWS, written by the engineer of round six before any
# change of that round and run once on the scorer of its time (docs/benchmarks.md), never debugged on. Kinds the
# other parts lack: a DNS answer (an IPv4 address alone), EXPLAIN ANALYZE's execution time among other timings, a
# rate a user asks for (per second, restated per minute), a Kubernetes HPA row (targets as `73%/80%`, pods
# between two columns), a Dockerfile HEALTHCHECK's flag, git's ahead/behind counts; summaries as a pull request
# description and as YAML.
# ---------------------------------------------------------------------------------------------------------------

BLIND_12 = "blind_12"
PARTS = (*PARTS, BLIND_12)
STYLES[BLIND_12] = ("pr", "yaml")


def _blind_12(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # A DNS answer: an address alone on its line.
    ip = f"10.{k % 200}.{k % 7}.{17 + k % 50}"
    wrong_ip = f"10.{k % 200}.{k % 7}.{18 + k % 50}"
    host = f"api-{k}.internal.example"
    c = _id(n, phase, "dig")
    items = [fcall(c, "exec_command", cmd=f"dig +short {host}"), fout(c, exec_out(0, f"{ip}\n"))]
    out.append(Planted("value", ip, "dns answer", items, [
        ("verbatim", True, True, None),
        ("resolves", True, False, Claim(f"{host}", ip, f"{host} resolves to {ip}.")),
        ("a record", True, False, Claim(f"DNS api-{k}", f"A {ip}", f"The A record of api-{k} points at {ip}.")),
        ("next address", False, False, Claim(f"{host}", wrong_ip, f"{host} resolves to {wrong_ip}.")),
        ("dropped", False, False, None),
    ]))

    # EXPLAIN ANALYZE: the execution time among the plan's other timings.
    exec_ms, plan_ms = 800 + k * 7, 0.3 + (k % 5) / 10
    c = _id(n, phase, "explain")
    items = [fcall(c, "exec_command", cmd=f"psql -d shop -c 'EXPLAIN ANALYZE SELECT * FROM orders_{k} "
                                          "WHERE status = 1'"),
             fout(c, exec_out(0, f"Seq Scan on orders_{k}  (cost=0.00..41234.00 rows=1203 width=96) (actual "
                                 f"time=0.031..{exec_ms - 2}.118 rows=1187 loops=1)\n  Filter: (status = 1)\n"
                                 f"  Rows Removed by Filter: 998813\nPlanning Time: {plan_ms:.3f} ms\n"
                                 f"Execution Time: {exec_ms}.412 ms\n(5 rows)"))]
    out.append(Planted("value", f"{exec_ms}.412", "explain time", items, [
        ("verbatim", True, True, None),
        ("ms", True, False, Claim(f"orders_{k} query", f"{exec_ms} ms", f"The status query on orders_{k} takes "
                                  f"{exec_ms} ms (sequential scan).")),
        ("seconds", True, False, Claim(f"orders_{k} query", f"{exec_ms / 1000:.2f} s", f"orders_{k}: the status "
                                       f"query needs {exec_ms / 1000:.2f} s, a full scan.")),
        ("planning as execution", False, False, Claim(f"orders_{k} query", f"{plan_ms:.3f} ms", f"The status query "
                                                      f"on orders_{k} takes {plan_ms:.3f} ms.")),
        ("dropped", False, False, None),
    ]))

    # A rate the user asks for, per second; a summary may restate it per minute.
    rps = 120 + k * 5
    message = f"One more thing for checkout {k}: it must sustain {rps} requests per second at the sale's peak."
    out.append(Planted("constraint", f"checkout {k}: it must sustain", "user rate", [user_message(message)], [
        ("verbatim", True, True, None),
        ("per second", True, False, Claim(f"checkout {k} load", f">= {rps} req/s", f"checkout {k} has to hold "
                                          f"{rps} req/s at peak.")),
        ("per minute", True, False, Claim(f"checkout {k} load", f"{rps * 60:,} requests/min", f"checkout {k} must "
                                          f"sustain {rps * 60:,} requests per minute at the peak.")),
        ("per minute for per second", False, False, Claim(f"checkout {k} load", f"{rps} requests/min",
                                                          f"checkout {k} must sustain {rps} requests per minute "
                                                          "at the peak.")),
        ("dropped", False, False, None),
    ]))

    # A Kubernetes HPA row: current/target utilisation and the pod range.
    cur, target, lo, hi, now = 55 + k % 40, 70 + (k % 3) * 5, 2 + k % 3, 10 + k % 9, 4 + k % 5
    c = _id(n, phase, "hpa")
    items = [fcall(c, "exec_command", cmd=f"kubectl get hpa web-{k} -n shop"),
             fout(c, exec_out(0, "NAME      REFERENCE              TARGETS        MINPODS   MAXPODS   REPLICAS   AGE\n"
                                 f"web-{k}   Deployment/web-{k}   cpu: {cur}%/{target}%   {lo}         {hi}        "
                                 f"{now}          6d"))]
    out.append(Planted("value", f"web-{k}", "hpa row", items, [
        ("verbatim", True, True, None),
        ("full", True, False, Claim(f"web-{k} autoscaling", f"cpu {cur}% of {target}% target, {lo}-{hi} pods, "
                                    f"{now} running", f"web-{k} runs {now} pods, CPU at {cur}% against a {target}% "
                                    f"target, scaling between {lo} and {hi}.")),
        ("policy only", True, False, Claim(f"web-{k} autoscaling", f"target {target}% cpu, {lo} to {hi} pods",
                                           f"web-{k} scales on CPU at {target}%, from {lo} to {hi} pods.")),
        ("wrong max", False, False, Claim(f"web-{k} autoscaling", f"target {target}% cpu, {lo} to {hi + 4} pods",
                                          f"web-{k} scales on CPU at {target}%, from {lo} to {hi + 4} pods.")),
        ("dropped", False, False, None),
    ]))

    # A Dockerfile HEALTHCHECK flag.
    flag = ("timeout", "interval", "start-period")[phase]
    secs = {"timeout": 3 + k % 7, "interval": 15 + k % 30, "start-period": 20 + k % 40}[flag]
    others = {"timeout": f"--interval=30s --timeout={secs}s", "interval": f"--interval={secs}s --timeout=5s",
              "start-period": f"--interval=30s --timeout=5s --start-period={secs}s"}[flag]
    c = _id(n, phase, "docker")
    items = [fcall(c, "exec_command", cmd=f"cat services/worker-{k}/Dockerfile"),
             fout(c, exec_out(0, "FROM python:3.12-slim\nWORKDIR /app\nCOPY . .\nRUN pip install --no-cache-dir -r "
                                 f"requirements.txt\nHEALTHCHECK {others} --retries=3 CMD curl -fsS "
                                 "http://localhost:8080/healthz || exit 1\nCMD [\"python\", \"-m\", \"worker\"]\n"))]
    spoken = flag.replace("-", " ")
    out.append(Planted("value", flag, "healthcheck flag", items, [
        ("verbatim", True, True, None),
        ("seconds", True, False, Claim(f"worker-{k} health check", f"{spoken} {secs}s", f"worker-{k}'s health "
                                       f"check has a {spoken} of {secs} seconds.")),
        ("ms", True, False, Claim(f"worker-{k} health check", f"{spoken} {secs * 1000} ms", f"The worker-{k} "
                                  f"image checks health with a {spoken} of {secs * 1000} ms.")),
        ("wrong", False, False, Claim(f"worker-{k} health check", f"{spoken} {secs + 10}s", f"worker-{k}'s health "
                                      f"check has a {spoken} of {secs + 10} seconds.")),
        ("dropped", False, False, None),
    ]))

    # git's ahead/behind counts of a branch.
    ahead, behind = 2 + k % 6, 9 + k % 11
    branch = f"feature/refund-{k}"
    c = _id(n, phase, "git")
    items = [fcall(c, "exec_command", cmd="git status -sb"),
             fout(c, exec_out(0, f"## {branch}...origin/{branch} [ahead {ahead}, behind {behind}]\n M src/refund.ts\n"))]
    out.append(Planted("value", f"refund-{k}", "branch divergence", items, [
        ("verbatim", True, True, None),
        ("words", True, False, Claim(f"{branch}", f"{ahead} ahead / {behind} behind origin", f"{branch} is {ahead} "
                                     f"commits ahead of origin and {behind} behind, so it needs a rebase.")),
        ("behind only", False, False, Claim(f"{branch}", f"{behind} behind origin", f"{branch} is {behind} commits "
                                            "behind origin.")),
        ("swapped", False, False, Claim(f"{branch}", f"{behind} ahead / {ahead} behind origin", f"{branch} is "
                                        f"{behind} commits ahead of origin and {ahead} behind.")),
        ("dropped", False, False, None),
    ]))
    return out


GROUPS[BLIND_12] = ("dns answer", "explain time", "user rate", "hpa row", "healthcheck flag", "branch divergence")
