"""Round four of the labelled set (issue 46): two more blind parts, written by a different hand than round three's.

Round three's parts plant five facts per compaction from one template each and render every claim as a sentence.
These two parts are built another way, so that a scorer tuned on round three meets facts and summaries it was
never shaped by:

- **other fact kinds a coding session has**: a failure's file and line, test counts ("3 failed, 12 passed"), a
  commit hash the agent went on to use, an endpoint that answers 404, an environment variable, a duration in bash's
  `time` format (`BLIND_3`); a constraint and a decision stated by the user, a todo item, a version range in pip's
  resolver message, a command's flags, a percentage and a latency (`BLIND_4`);
- **claims written as key and value**: every claim has a short label, a value and a sentence, and a summary style
  picks what it shows: terse bullets with abbreviations, a JSON-ish object (`BLIND_3`), a narrative paragraph with
  the facts reordered, headed sections, a two-column table (`BLIND_4`);
- **a summariser with a temperament**: each session's summariser is careful or sloppy (how often a first claim is
  faithful), and at each later compaction restates, re-paraphrases or drops what the last window held; a fact lost
  stays lost (a wrong claim is copied forward) until the agent re-reads its items;
- **false-lost traps**: paraphrases, a git short hash for a long one, a reordered version range, correct unit
  conversions, a percentage rounded to a whole number after the user said whole percentages are fine;
- **lost traps**: a constraint turned into its opposite with the same words, a todo claimed done, a neighbouring
  commit's hash, a wrong line number, a wrong unit, the file without the line.

The truth of every mode is written by hand below, before any scorer ran on these parts. Sessions are `Session`s of
`labelled_set_round3`, so its `evaluate` counts them the same way (every planted fact, extracted or not).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from tests.compaction_app.engine.retention.labelled_set import (
    AGENTS,
    assistant,
    exec_out,
    fcall,
    fout,
    shell_out,
)
from tests.compaction_app.engine.retention.labelled_set_round3 import Session, Step

BLIND_3 = "blind_3"
BLIND_4 = "blind_4"
# A third part, written after the rules of round four were done, run once, never debugged on: a front end and its
# data (TypeScript and jest, npm ranges, docker digests, SQL row counts, Kubernetes sizes) summarised as YAML or
# as a checklist.
BLIND_5 = "blind_5"
PARTS = (BLIND_3, BLIND_4, BLIND_5)


@dataclass(frozen=True)
class Claim:
    """What a summary says of a fact: a short label, the value (complete on its own: a table or a JSON-ish object
    shows only label and value) and the same claim as a sentence (prose styles)."""

    label: str
    value: str
    sentence: str


@dataclass
class Planted:
    """One planted fact: its kind as the scorer names it, a tag only this fact's text holds, its family, the items
    that plant it, and its modes: (name, truth_held, items_kept_verbatim, claim or None)."""

    kind: str
    tag: str
    group: str
    items: list[dict]
    modes: list[tuple[str, bool, bool, Claim | None]]


def _id(n: int, phase: int, slot: str) -> str:
    return f"r4_{n}_{phase}_{slot}"


def _hex(seed: int, width: int = 9) -> str:
    """A hash-like hex string with at least one letter (what git prints)."""
    value = f"{(seed * 2654435761 + 0xabc) % 16 ** width:0{width}x}"
    return value if re.search(r"[a-f]", value) else "a" + value[1:]


# ---------------------------------------------------------------------------------------------------------------
# BLIND_3: a web back end being debugged
# ---------------------------------------------------------------------------------------------------------------

def _blind_3(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # A failing test: the file and line that raised, in the middle of pytest's report.
    line = 100 + k
    where = f"src/billing/totals_{k}.py:{line}"
    c = _id(n, phase, "fl")
    items = [fcall(c, "exec_command", cmd=f"pytest tests/billing/test_totals_{k}.py -q"),
             fout(c, exec_out(1, "F.\n=================================== FAILURES ===================================\n"
                                 "____________________________ test_rounds_half_even ____________________________\n"
                                 "    def test_rounds_half_even():\n"
                                 ">       assert compute_total([Line(\"10.005\")]) == Decimal(\"10.00\")\n"
                                 "E       AssertionError: assert Decimal('10.01') == Decimal('10.00')\n"
                                 f"{where}: AssertionError\n"
                                 "=========================== short test summary info ============================\n"
                                 f"FAILED tests/billing/test_totals_{k}.py::test_rounds_half_even - AssertionError\n"
                                 f"1 failed, 1 passed in 0.{10 + k % 89}s"))]
    out.append(Planted("error", where, "file and line", items, [
        ("verbatim", True, True, None),
        ("label", True, False, Claim("failing test", f"test_rounds_half_even, AssertionError at {where} (10.01 "
                                     "instead of 10.00)", f"test_rounds_half_even fails with an AssertionError raised "
                                     f"at {where}: 10.005 rounds to 10.01 instead of 10.00.")),
        ("line in words", True, False, Claim("rounding bug", f"src/billing/totals_{k}.py line {line} rounds 10.005 up "
                                             "(test_rounds_half_even fails)", f"Line {line} of "
                                             f"src/billing/totals_{k}.py rounds 10.005 up to 10.01, which is why "
                                             "test_rounds_half_even fails.")),
        ("wrong line", False, False, Claim("failing test", f"test_rounds_half_even, AssertionError at "
                                           f"src/billing/totals_{k}.py:{line + 10}", f"test_rounds_half_even fails "
                                           f"with an AssertionError at src/billing/totals_{k}.py:{line + 10}.")),
        ("file without line", False, False, Claim("failing test", f"test_rounds_half_even fails in "
                                                  f"src/billing/totals_{k}.py", f"test_rounds_half_even fails "
                                                  f"somewhere in src/billing/totals_{k}.py.")),
        ("dropped", False, False, None),
    ]))

    # Test counts of a suite run.
    failed, passed = 2 + k % 4, 10 + k % 30
    counts = f"{failed} failed, {passed} passed"
    c = _id(n, phase, "tc")
    items = [fcall(c, "exec_command", cmd=f"pytest tests/api_{k} -q -p no:cacheprovider"),
             fout(c, exec_out(1, f"..F...F..F......\nFAILED tests/api_{k}/test_refunds.py::test_partial_refund - "
                                 f"KeyError: 'currency'\n{counts} in {1 + k % 7}.{k % 100:02d}s"))]
    out.append(Planted("error", counts, "test counts", items, [
        ("verbatim", True, True, None),
        ("reordered", True, False, Claim(f"tests/api_{k}", f"{passed} passed, {failed} failed (test_partial_refund: "
                                         "KeyError 'currency')", f"The tests/api_{k} suite has {passed} passing and "
                                         f"{failed} failing tests; test_partial_refund raises KeyError 'currency'.")),
        ("of total", True, False, Claim(f"tests/api_{k}", f"{failed} of {failed + passed} failing, the rest pass",
                                        f"{failed} of the {failed + passed} tests in tests/api_{k} fail and the "
                                        "rest pass.")),
        ("wrong counts", False, False, Claim(f"tests/api_{k}", f"{failed + 1} failed, {passed - 1} passed",
                                             f"tests/api_{k}: {failed + 1} failed, {passed - 1} passed.")),
        ("no counts", False, False, Claim(f"tests/api_{k}", "some failures", f"Some tests in tests/api_{k} "
                                          "still fail.")),
        ("dropped", False, False, None),
    ]))

    # A commit hash from `git log`, which the agent then names as the regression.
    shas = [_hex(k * 4 + i) for i in range(4)]
    bad = shas[1]
    c = _id(n, phase, "sha")
    items = [fcall(c, "shell", command=["bash", "-lc", f"git log --oneline -4 -- src/billing/totals_{k}.py"]),
             fout(c, shell_out(0, f"{shas[0]} Merge branch 'fix/pdf'\n{bad} totals: switch to ROUND_HALF_UP\n"
                                  f"{shas[2]} invoices: add pdf export\n{shas[3]} bump django to 5.2")),
             assistant(f"{bad} switched the rounding mode; that is where 10.005 started rounding up. I'll revert "
                       "it after the tests are green.")]
    out.append(Planted("value", bad, "commit hash", items, [
        ("verbatim", True, True, None),
        ("label", True, False, Claim("regression", f"{bad} (ROUND_HALF_UP), to revert", f"The rounding regression "
                                     f"came with commit {bad} (ROUND_HALF_UP); it will be reverted.")),
        ("short hash", True, False, Claim("regression", f"commit {bad[:7]} (switch to ROUND_HALF_UP), revert "
                                          "planned", f"Commit {bad[:7]} switched to ROUND_HALF_UP and will be "
                                          "reverted.")),
        ("neighbour's hash", False, False, Claim("regression", f"{shas[2]} (rounding mode), to revert",
                                                 f"The rounding regression came with commit {shas[2]}.")),
        ("no hash", False, False, Claim("regression", "the ROUND_HALF_UP commit, to revert", "A recent commit "
                                        "switched to ROUND_HALF_UP; it will be reverted.")),
        ("dropped", False, False, None),
    ]))

    # An endpoint that answers 404, read from the dev server's log.
    path = f"/api/v2/invoices/{k}/pdf"
    c = _id(n, phase, "ep")
    items = [fcall(c, "exec_command", cmd="tail -n 3 logs/runserver.log"),
             fout(c, exec_out(0, f"[07/Dec/2026 08:01:12] \"GET /api/v2/invoices/{k}/ HTTP/1.1\" 200 812\n"
                                 f"Not Found: {path}\n"
                                 f"[07/Dec/2026 08:01:13] \"GET {path} HTTP/1.1\" 404 179"))]
    out.append(Planted("error", path, "endpoint", items, [
        ("verbatim", True, True, None),
        ("arrow", True, False, Claim("404", f"GET {path} -> 404 (no route yet)", f"GET {path} answers 404: the "
                                     "route does not exist yet.")),
        ("sentence", True, False, Claim("pdf route", f"{path} is not routed (404 Not Found)", f"The pdf "
                                        f"endpoint {path} is not routed yet and returns 404 Not Found.")),
        ("wrong version", False, False, Claim("404", f"GET /api/v1/invoices/{k}/pdf -> 404",
                                              f"GET /api/v1/invoices/{k}/pdf answers 404.")),
        ("unspecific", False, False, Claim("server log", "read the last lines", "Read the end of the runserver "
                                           "log.")),
        ("dropped", False, False, None),
    ]))

    # An environment variable, among others the same command printed.
    name = ("DB_CONN_MAX_AGE", "WEB_CONCURRENCY", "CELERY_WORKER_PREFETCH")[phase]
    value = (60 + k, 2 + k % 9, 4 + k % 5)[phase]
    prefix = name.split("_", 1)[0]
    c = _id(n, phase, "env")
    items = [fcall(c, "exec_command", cmd=f"env | grep ^{prefix}_ | sort"),
             fout(c, exec_out(0, f"{prefix}_DEBUG=0\n{name}={value}\n{prefix}_ZONE=eu-west-{1 + k % 3}"))]
    words = {"DB_CONN_MAX_AGE": "database connections are kept for", "WEB_CONCURRENCY": "web workers:",
             "CELERY_WORKER_PREFETCH": "celery workers prefetch"}[name]
    out.append(Planted("value", name, "env var", items, [
        ("verbatim", True, True, None),
        ("assignment", True, False, Claim("env", f"{name}={value}", f"The environment sets {name}={value}.")),
        ("words", True, False, Claim(name, f"{value} ({words} {value})", f"{words.capitalize()} {value} "
                                     f"({name}).")),
        ("wrong value", False, False, Claim("env", f"{name}={value + 3}", f"The environment sets {name}="
                                            f"{value + 3}.")),
        ("unspecific", False, False, Claim("env", f"checked the {prefix}_ variables", f"Checked the {prefix}_ "
                                           "environment variables.")),
        ("dropped", False, False, None),
    ]))

    # A duration in bash's `time` format.
    seconds = 10 + k % 49
    real = f"2m{seconds:02d}.310s"
    total = 120 + seconds + 0.31
    c = _id(n, phase, "dur")
    items = [fcall(c, "shell", command=["bash", "-lc", f"time ./manage.py migrate --check --database shard_{k}"]),
             fout(c, shell_out(0, f"No migrations to apply.\n\nreal\t{real}\nuser\t0m3.120s\nsys\t0m0.410s"))]
    out.append(Planted("value", real, "duration", items, [
        ("verbatim", True, True, None),
        ("minutes and seconds", True, False, Claim(f"migrate --check on shard_{k}", f"2 min {seconds} s wall "
                                                   "time, nothing to apply", f"migrate --check on shard_{k} found "
                                                   f"nothing to apply and took 2 min {seconds} s.")),
        ("seconds", True, False, Claim(f"migrate --check on shard_{k}", f"about {total:.0f} s", f"migrate --check "
                                       f"on shard_{k} takes about {total:.0f} seconds.")),
        ("decimal minutes", True, False, Claim(f"migrate --check on shard_{k}", f"{total / 60:.1f} min",
                                               f"migrate --check on shard_{k} takes {total / 60:.1f} minutes.")),
        ("wrong", False, False, Claim(f"migrate --check on shard_{k}", f"{seconds} s", f"migrate --check on "
                                      f"shard_{k} takes {seconds} seconds.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# BLIND_4: what the user decided, what is left to do, and the numbers of a release
# ---------------------------------------------------------------------------------------------------------------

CONSTRAINTS = (
    # (message, tag, faithful paraphrase, the opposite in the same words)
    ("Next, the exporter. Don't run migrations against prod-{k}; use staging-{k} until the freeze ends.",
     "prod-{k}", "no migrations on prod-{k}; staging-{k} only until the freeze is over",
     "migrations go to prod-{k} now; staging-{k} is frozen"),
    ("Look at the flaky export next. Never push release/{n}.{p} with --no-verify; the hooks run the license check.",
     "release/{n}.{p}", "pushes to release/{n}.{p} keep the hooks (no --no-verify), for the license check",
     "pushing release/{n}.{p} with --no-verify is fine, skip the license check"),
    ("Then tidy up. Keep the field names of InvoiceSerializer{k} as they are; mobile app {k} reads them.",
     "InvoiceSerializer{k}", "InvoiceSerializer{k} field names are frozen (mobile app {k} reads them)",
     "renaming InvoiceSerializer{k} fields is fine, mobile app {k} was updated"),
)

DECISIONS = (
    ("Redis streams", "Celery", "the export queue"),
    ("S3 presigned URLs", "streaming through Django", "PDF downloads"),
    ("pg_partman", "hand-written partitions", "the events table"),
)

TODOS = (
    ("backfill invoice_lines for tenant t{k}", "tenant t{k}", "tenant t{k} still needs its invoice_lines backfill",
     "backfilled invoice_lines for tenant t{k}"),
    ("rerun the nightly export of 2026-11-{d:02d}", "2026-11-{d:02d}", "the nightly export of 2026-11-{d:02d} "
     "must be run again", "reran the nightly export of 2026-11-{d:02d}"),
    ("delete the temporary bucket exports-tmp-{k}", "exports-tmp-{k}", "bucket exports-tmp-{k} is still to be "
     "deleted", "deleted the temporary bucket exports-tmp-{k}"),
)

RANGES = (("requests-oauthlib", "2.0.0", "oauthlib"), ("botocore", "1.35.{p}", "urllib3"),
          ("django-storages", "1.14.{p}", "boto3"))


def _blind_4(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    fmt = {"k": k, "n": n, "p": phase, "d": 1 + k % 28}
    out: list[Planted] = []

    message, tag, faithful, opposite = (s.format(**fmt) for s in CONSTRAINTS[phase])
    items = [user_message(message)]
    out.append(Planted("constraint", tag, "user constraint", items, [
        ("verbatim", True, True, None),
        ("paraphrase", True, False, Claim("user constraint", faithful, f"The user asked: {faithful}.")),
        ("opposite", False, False, Claim("user constraint", opposite, f"The user said {opposite}.")),
        ("dropped", False, False, None),
    ]))

    chosen, rejected, thing = DECISIONS[phase]
    ticket = f"PAY-{k}"
    items = [user_message(f"We'll go with {chosen} instead of {rejected} for {thing} ({ticket}).")]
    out.append(Planted("goal", ticket, "user decision", items, [
        ("verbatim", True, True, None),
        ("paraphrase", True, False, Claim(f"decision {ticket}", f"{chosen} for {thing}, not {rejected}",
                                          f"For {thing} the user chose {chosen} over {rejected} ({ticket}).")),
        ("reversed", False, False, Claim(f"decision {ticket}", f"{rejected} for {thing}, not {chosen}",
                                         f"For {thing} the user chose {rejected} over {chosen} ({ticket}).")),
        ("no content", False, False, Claim(f"decision {ticket}", "discussed", f"{ticket} was discussed.")),
        ("dropped", False, False, None),
    ]))

    todo, tag, pending, done = (s.format(**fmt) for s in TODOS[phase])
    items = [assistant(f"The export now runs for small tenants.\nTODO: {todo}\nTODO: update the CHANGELOG")]
    out.append(Planted("next_step", tag, "todo item", items, [
        ("verbatim", True, True, None),
        ("pending", True, False, Claim("open", pending, f"Still open: {pending}.")),
        ("claimed done", False, False, Claim("done", done, f"Already done: {done}.")),
        ("dropped", False, False, None),
    ]))

    package, version, dep = (s.format(**fmt) for s in RANGES[phase])
    upper, lower, have = f"{3 + phase}.0", f"{1 + phase}.{k % 9}", f"{3 + phase}.{1 + k % 5}"
    spec = f"{dep}<{upper},>={lower}"
    c = _id(n, phase, "pip")
    items = [fcall(c, "shell", command=["bash", "-lc", "pip install -e '.[dev]'"]),
             fout(c, shell_out(0, "Successfully built invoices\nERROR: pip's dependency resolver does not currently "
                                  "take into account all the packages that are installed. This behaviour is the "
                                  "source of the following dependency conflicts.\n"
                                  f"{package} {version} requires {spec}, but you have {dep} {have} which is "
                                  "incompatible.\nSuccessfully installed invoices-0.1"))]
    out.append(Planted("error", spec, "version range", items, [
        ("verbatim", True, True, None),
        ("reordered range", True, False, Claim("dependency conflict", f"{package} {version} needs {dep} >={lower},"
                                               f"<{upper}; {dep} {have} is installed", f"{package} {version} needs "
                                               f"{dep} >={lower},<{upper}, but {dep} {have} is installed.")),
        ("wrong bound", False, False, Claim("dependency conflict", f"{package} needs {dep}<{3 + phase}.{1 + k % 5}"
                                            f"; {dep} {have} installed", f"{package} needs {dep} below "
                                            f"{3 + phase}.{1 + k % 5}.")),
        ("unspecific", False, False, Claim("pip", "dependency conflict reported", "pip reported a dependency "
                                           "conflict.")),
        ("dropped", False, False, None),
    ]))

    maxfail = 1 + k % 5
    command = f"pytest -x --reuse-db -p no:randomly --maxfail={maxfail} tests/export_{k}"
    c = _id(n, phase, "cmd")
    items = [fcall(c, "exec_command", cmd=command),
             fout(c, exec_out(0, f"{30 + k % 20} passed in {2 + k % 9}.4s"))]
    out.append(Planted("command", f"--maxfail={maxfail} tests/export_{k}", "cli flags", items, [
        ("verbatim", True, True, None),
        ("quoted", True, False, Claim("export tests", f"`{command}` passed", f"`{command}` passed.")),
        ("status first", True, False, Claim("export tests", f"passed (exit 0): {command}", f"The export tests pass "
                                            f"(exit 0) with {command}.")),
        ("wrong status", False, False, Claim("export tests", f"`{command}` failed", f"`{command}` failed.")),
        ("wrong flag", False, False, Claim("export tests", f"`{command.replace('--reuse-db', '--create-db')}` "
                                           "passed", f"`{command.replace('--reuse-db', '--create-db')}` passed.")),
        ("dropped", False, False, None),
    ]))

    rate = 1 + (k * 37 % 300) / 100
    c = _id(n, phase, "err")
    items = [fcall(c, "exec_command", cmd=f"./scripts/loadtest --profile checkout-{k} --summary"),
             fout(c, exec_out(0, f"requests: 12000\nerror_rate: {rate:.2f}%\nduration: 600 s"))]
    out.append(Planted("value", f"error_rate = {rate:.2f}%", "percentage", items, [
        ("verbatim", True, True, None),
        ("same figure", True, False, Claim(f"checkout-{k} load test", f"error rate {rate:.2f}%", f"The "
                                           f"checkout-{k} load test ran with an error rate of {rate:.2f}%.")),
        ("whole percent", True, False, Claim(f"checkout-{k} load test", f"error rate ~{round(rate)}%",
                                             f"The checkout-{k} load test had about {round(rate)}% errors.")),
        ("wrong figure", False, False, Claim(f"checkout-{k} load test", f"error rate {rate * 10:.1f}%", f"The "
                                             f"checkout-{k} load test had {rate * 10:.1f}% errors.")),
        ("dropped", False, False, None),
    ]))

    p95 = 400 + k
    c = _id(n, phase, "lat")
    items = [fcall(c, "exec_command", cmd=f"./scripts/latency --route /export/{k}"),
             fout(c, exec_out(0, f"samples: 5000\np95_latency: {p95} ms\np50_latency: 88 ms"))]
    out.append(Planted("value", f"p95_latency = {p95} ms", "latency", items, [
        ("verbatim", True, True, None),
        ("same unit", True, False, Claim(f"/export/{k} p95", f"{p95} ms", f"/export/{k} answers in {p95} ms at "
                                         "the 95th percentile.")),
        ("seconds", True, False, Claim(f"/export/{k} p95", f"{p95 / 1000:.3f} s", f"The p95 latency of "
                                       f"/export/{k} is {p95 / 1000:.3f} seconds.")),
        ("wrong unit", False, False, Claim(f"/export/{k} p95", f"{p95} s", f"The p95 latency of /export/{k} "
                                           f"is {p95} seconds.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# BLIND_5: a front end and its data, written after round four's rules
# ---------------------------------------------------------------------------------------------------------------

def _blind_5(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    line = 30 + k % 60
    where = f"src/app/cart_{k}.ts({line},7)"
    c = _id(n, phase, "tsc")
    items = [fcall(c, "exec_command", cmd="npx tsc --noEmit -p web"),
             fout(c, exec_out(2, f"{where}: error TS2345: Argument of type 'string' is not assignable to parameter "
                                 "of type 'number'.\n\nFound 1 error in " + f"src/app/cart_{k}.ts:{line}"))]
    out.append(Planted("error", where, "compiler error", items, [
        ("verbatim", True, True, None),
        ("words", True, False, Claim("tsc", f"TS2345 at src/app/cart_{k}.ts line {line}, col 7: a string passed "
                                     "where a number is expected", f"tsc reports TS2345 in src/app/cart_{k}.ts at "
                                     f"line {line}: a string is passed where a number is expected.")),
        ("wrong line", False, False, Claim("tsc", f"TS2345 at src/app/cart_{k}.ts line {line + 3}",
                                           f"tsc reports TS2345 in src/app/cart_{k}.ts at line {line + 3}.")),
        ("no line", False, False, Claim("tsc", f"a type error in src/app/cart_{k}.ts", f"tsc finds a type error "
                                        f"in src/app/cart_{k}.ts.")),
        ("dropped", False, False, None),
    ]))

    failed, passed = 1 + k % 3, 30 + k % 40
    counts = f"{failed} failed, {passed} passed, {failed + passed} total"
    c = _id(n, phase, "jest")
    items = [fcall(c, "exec_command", cmd=f"pnpm jest packages/cart-{k}"),
             fout(c, exec_out(1, f"FAIL packages/cart-{k}/src/total.test.ts\n  ● total › rounds half up\n\n"
                                 f"Tests:       {counts}\nTime:        {4 + k % 5}.21 s"))]
    out.append(Planted("error", counts, "test counts", items, [
        ("verbatim", True, True, None),
        ("fraction", True, False, Claim(f"jest cart-{k}", f"{passed}/{failed + passed} passing, {failed} failing",
                                        f"jest on cart-{k}: {passed} of {failed + passed} tests pass and {failed} "
                                        "fail.")),
        ("wrong", False, False, Claim(f"jest cart-{k}", f"{failed + 1} failed, {passed - 1} passed",
                                      f"jest on cart-{k}: {failed + 1} failed and {passed - 1} passed.")),
        ("no counts", False, False, Claim(f"jest cart-{k}", "red", f"jest on cart-{k} is red.")),
        ("dropped", False, False, None),
    ]))

    digest = (_hex(k * 11, 32) + _hex(k * 13 + 1, 32))[:64]
    c = _id(n, phase, "push")
    items = [fcall(c, "exec_command", cmd=f"docker push registry.local/web:{k}"),
             fout(c, exec_out(0, f"The push refers to repository [registry.local/web]\n{k}: digest: "
                                 f"sha256:{digest} size: 1573")),
             assistant(f"Pinned the deploy to registry.local/web@sha256:{digest}; tags can move.")]
    out.append(Planted("value", digest, "image digest", items, [
        ("verbatim", True, True, None),
        ("pinned", True, False, Claim("deploy pin", f"registry.local/web@sha256:{digest}", f"The deploy is pinned "
                                      f"to registry.local/web@sha256:{digest}.")),
        ("tag only", False, False, Claim("deploy pin", f"registry.local/web:{k}", f"The deploy uses "
                                         f"registry.local/web:{k}.")),
        ("dropped", False, False, None),
    ]))

    rows = 1000 + k * 7
    c = _id(n, phase, "sql")
    items = [fcall(c, "exec_command", cmd=f"psql -c \"UPDATE invoices SET currency='EUR' WHERE tenant_id={k}\""),
             fout(c, exec_out(0, f"UPDATE {rows}")),
             assistant(f"Moved {rows} invoices of tenant {k} to EUR.")]
    out.append(Planted("value", str(rows), "row count", items, [
        ("verbatim", True, True, None),
        ("thousands", True, False, Claim(f"tenant {k}", f"{rows:,} invoices moved to EUR", f"{rows:,} invoices of "
                                         f"tenant {k} now use EUR.")),
        ("wrong", False, False, Claim(f"tenant {k}", f"{rows + 90} invoices moved to EUR", f"{rows + 90} invoices "
                                      f"of tenant {k} now use EUR.")),
        ("unspecific", False, False, Claim(f"tenant {k}", "invoices moved to EUR", f"The invoices of tenant {k} "
                                           "now use EUR.")),
        ("dropped", False, False, None),
    ]))

    dep = ("zod", "date-fns", "axios")[phase]
    spec = f"~{3 + phase}.{20 + k % 7}.{k % 10}"
    c = _id(n, phase, "pkg")
    items = [fcall(c, "exec_command", cmd=f"jq .dependencies web-{k}/package.json"),
             fout(c, exec_out(0, '{\n  "react": "^18.2.0",\n  "' + dep + '": "' + spec + '"\n}'))]
    out.append(Planted("value", f"{dep} = {spec}", "npm range", items, [
        ("verbatim", True, True, None),
        ("pinned", True, False, Claim(dep, f"{spec} in web-{k}/package.json", f"web-{k} depends on {dep} {spec}.")),
        ("caret", False, False, Claim(dep, f"^{spec[1:]} in web-{k}/package.json", f"web-{k} depends on {dep} "
                                      f"^{spec[1:]}.")),
        ("dropped", False, False, None),
    ]))

    if phase == 0:
        message = f"Start with the cart. Use pnpm only; npm install rewrites the lockfile of web-{k}."
        tag, faithful = f"web-{k}", f"pnpm, never npm, in web-{k} (npm rewrites the lockfile)"
        opposite = f"npm install is fine in web-{k}; the lockfile may be rewritten"
    elif phase == 1:
        message = f"Then the export. Never log card numbers in export-{k}; mask them as ****1234."
        tag, faithful = f"export-{k}", f"no card numbers in the export-{k} logs (masked as ****1234)"
        opposite = f"export-{k} logs the card numbers in full"
    else:
        message = f"Last, the reports. The reports-{k} job must finish before 06:00 UTC."
        tag, faithful = f"reports-{k}", f"reports-{k} has to be done by 06:00 UTC"
        opposite = f"reports-{k} may run past 06:00 UTC"
    out.append(Planted("constraint", tag, "user constraint", [user_message(message)], [
        ("verbatim", True, True, None),
        ("paraphrase", True, False, Claim("constraint", faithful, f"User: {faithful}.")),
        ("opposite", False, False, Claim("constraint", opposite, f"User: {opposite}.")),
        ("dropped", False, False, None),
    ]))

    chosen, rejected = (("server-sent events", "websockets"), ("a nightly cron", "a Celery beat task"),
                        ("Parquet", "CSV"))[phase]
    ticket = f"UI-{k}"  # not WEB-{k}: the tag would also match the constraint about web-{k}
    items = [user_message(f"For {ticket}, let's use {chosen} rather than {rejected}.")]
    out.append(Planted("goal", ticket, "user decision", items, [
        ("verbatim", True, True, None),
        ("paraphrase", True, False, Claim(ticket, f"{chosen}, not {rejected}", f"{ticket}: the user picked {chosen} "
                                          f"over {rejected}.")),
        ("reversed", False, False, Claim(ticket, f"{rejected} instead of {chosen}", f"{ticket}: {rejected} "
                                         f"rather than {chosen}.")),
        ("dropped", False, False, None),
    ]))

    column = f"orders_{k}.created_at"
    items = [assistant(f"Plan:\n- [x] reproduce the slow query\n- [ ] add an index on {column}\n"
                       "- [ ] run EXPLAIN ANALYZE again")]
    out.append(Planted("next_step", column, "todo item", items, [
        ("verbatim", True, True, None),
        ("open box", True, False, Claim("todo", f"[ ] index on {column}", f"An index on {column} is still to add.")),
        ("done", False, False, Claim("todo", f"[x] index on {column} added", f"Added the index on {column}.")),
        ("dropped", False, False, None),
    ]))

    mib = 900 + k * 3
    c = _id(n, phase, "top")
    items = [fcall(c, "exec_command", cmd=f"kubectl top pod -l app=api-{k}"),
             fout(c, exec_out(0, f"NAME                CPU(cores)   MEMORY(bytes)\napi-{k}-7f9c5-x2x   250m         "
                                 f"{mib}Mi"))]
    out.append(Planted("value", f"{mib}Mi", "k8s memory", items, [
        ("verbatim", True, True, None),
        ("GiB", True, False, Claim(f"api-{k} memory", f"{mib / 1024:.2f} GiB", f"api-{k} uses {mib / 1024:.2f} GiB "
                                   "of memory.")),
        ("MiB", True, False, Claim(f"api-{k} memory", f"{mib} MiB", f"api-{k} uses {mib} MiB.")),
        ("wrong unit", False, False, Claim(f"api-{k} memory", f"{mib} KiB", f"api-{k} uses {mib} KiB.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Summary styles
# ---------------------------------------------------------------------------------------------------------------

STYLES = {BLIND_3: ("terse", "jsonish"), BLIND_4: ("narrative", "headed", "kvtable"), BLIND_5: ("yaml", "checklist")}
ABBREVIATIONS = {"seconds": "s", "minutes": "min", "about": "~", "instead of": "vs", "because": "b/c",
                 "with": "w/", "configuration": "cfg", "environment": "env", "function": "fn", "to revert": "(rvt)"}
SECTIONS = {"user constraint": "User said", "user decision": "User said", "todo item": "Open items",
            "version range": "Build", "cli flags": "Build", "percentage": "Numbers", "latency": "Numbers"}


def _abbreviate(text: str) -> str:
    for word, short in ABBREVIATIONS.items():
        text = re.sub(rf"\b{re.escape(word)}\b", short, text)
    return text


def render(style: str, claims: list[tuple[str, Claim]], rng: random.Random) -> str:
    """The summary text of a style: `claims` are (group, claim) in the order the summariser thought of them."""
    if not claims:
        return "Nothing settled yet."
    if style == "terse":
        return "\n".join(f"- {_abbreviate(c.label)}: {_abbreviate(c.value)}" for _, c in claims)
    if style == "yaml":
        return "facts:\n" + "\n".join(f"  - {c.label}: {c.value}" for _, c in claims)
    if style == "checklist":
        # A todo's box is its claim's own ("[ ]" still to do, "[x]" done); every other claim is a finding.
        return "\n".join(f"- [{' ' if c.value.startswith('[ ]') else 'x'}] {c.sentence}" for g, c in claims)
    if style == "jsonish":
        body = ",\n".join(f'    "{c.label}": "{c.value}"' for _, c in claims)
        return '{\n  "state": "debugging",\n  "facts": {\n' + body + "\n  }\n}"
    if style == "narrative":
        shuffled = list(claims)
        rng.shuffle(shuffled)
        return "Picking up the export work. " + " ".join(c.sentence for _, c in shuffled)
    if style == "headed":
        out: list[str] = []
        for section in dict.fromkeys(SECTIONS.values()):
            lines = [c.sentence for g, c in claims if SECTIONS.get(g) == section]
            if lines:
                out += [f"### {section}", *(f"* {line}" for line in lines), ""]
        return "\n".join(out).strip()
    return "| topic | detail |\n|---|---|\n" + "\n".join(f"| {c.label} | {c.value} |" for _, c in claims)


# ---------------------------------------------------------------------------------------------------------------
# Sessions: a summariser with a temperament, over one to three compactions
# ---------------------------------------------------------------------------------------------------------------

TEMPERAMENTS = {"careful": 0.65, "sloppy": 0.4}  # how often a first claim of a fact is a faithful one


def _first_mode(fact: Planted, faithful: float, rng: random.Random) -> tuple[str, bool, bool, Claim | None]:
    held = rng.random() < faithful
    return rng.choice([m for m in fact.modes if m[1] == held])


def _build(n: int, part: str, rng: random.Random) -> Session:
    make = {BLIND_3: _blind_3, BLIND_4: _blind_4, BLIND_5: _blind_5}[part]
    style = rng.choice(STYLES[part])
    temperament = rng.choice(sorted(TEMPERAMENTS))
    session = Session(name=f"{part}-{n}-{temperament}", part=part, style=style)
    goal = user_message({BLIND_4: f"Get invoice export {n} ready for the release. Whole percentages are fine in "
                                  "your notes.",
                         BLIND_5: f"Make checkout {n} fast and correct again."}.get(
        part, f"Find why invoice totals {n} are off by a cent and fix it."))
    window: list[dict] = [AGENTS, goal]
    facts: dict[tuple[str, str], Planted] = {}
    # Each fact's current state in the window: (mode name, held, items in the window, claim).
    state: dict[tuple[str, str], tuple[str, bool, bool, Claim | None]] = {}
    for phase in range(1 + (n * 7) % 3):
        new = make(n, phase)
        before = list(window)
        for fact in new:
            before += fact.items
        fresh = list(new)
        # The agent sometimes goes back to an earlier fact (reads the file again, re-runs the command).
        if phase and rng.random() < 0.4:
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
                # Written again in other words (a faithful mode that is not the items).
                other = rng.choice([m for m in facts[key].modes if m[1] and not m[2]])
                state[key] = (f"{name}, then {other[0]}", True, False, other[3])
            # Otherwise the claim (or the items) is carried over as it was, right or wrong.
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
        summary = user_message(f"{SUMMARY_PREFIX}\n{render(style, claims, rng)}")
        step.after = [AGENTS, goal, *in_window, summary]
        session.steps.append(step)
        window = step.after
    return session


def sessions(part: str = BLIND_3, count: int = 40, seed: int = 464) -> list[Session]:
    rng = random.Random(f"{seed}-{part}")
    return [_build(n, part, rng) for n in range(1, count + 1)]


GROUPS = {BLIND_3: ("file and line", "test counts", "commit hash", "endpoint", "env var", "duration"),
          BLIND_4: ("user constraint", "user decision", "todo item", "version range", "cli flags", "percentage",
                    "latency"),
          BLIND_5: ("compiler error", "test counts", "image digest", "row count", "npm range", "user constraint",
                    "user decision", "todo item", "k8s memory")}
