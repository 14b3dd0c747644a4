"""Round seven of the labelled set (issue 46): two held-out parts written before any change of round seven.

Every part so far brought shapes no rule read, so the figure that matters is the one on a part nobody tuned on.
These two were written, their truth by hand, before the scorer of round seven was touched:

- `BLIND_13`, a payments platform (TypeScript, Java, PostgreSQL) readied for a new region: a hyperfine benchmark
  (mean and spread in ms), a Helm release row (revision, chart, app version), a psql GROUP BY result of several
  rows, an nginx access-log line that answered 502 with its request time, a Java stack trace, a docker image's size
  in `docker images`' table, and a user's deploy window in prose (clock times and weekdays); summarised as a chat
  dump (claims on one line, slash-separated, no full stops) or as a three-column markdown table.
  blind_13 is the part whose misses round seven reads.
- `BLIND_14`, a search indexer (Go, Python) on Kubernetes: `go test -bench` (ns/op among B/op and allocs/op), pip's
  `Successfully installed` list, `git diff --stat`'s totals, an environment dump whose value a later `kubectl set env`
  corrects, a Go panic with its goroutine trace, a user's CPU limit said casually, and `kubectl get pods`' restart
  counts; summarised in Spanish prose or as JSON lines. blind_14 is kept unread until the end of round seven: run
  once before the change and once after it, its figure is the estimate for a benchmark never seen.

Lost renderings carry a wrong unit, a neighbouring cell or row, a stale value, a caller's line for the raising
line, a dropped restriction, swapped counts, a lower bound for the installed version, or nothing. Sessions are
`labelled_set_round3.Session`s built like round five's (a careful or sloppy summariser over one to three
compactions), so `labelled_set_round3.evaluate` counts them the same way.
"""

from __future__ import annotations

import json
import random

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from tests.compaction_app.engine.retention.labelled_set import AGENTS, exec_out, fcall, fout
from tests.compaction_app.engine.retention.labelled_set_round3 import Session, Step
from tests.compaction_app.engine.retention.labelled_set_round4 import (
    TEMPERAMENTS,
    Claim,
    Planted,
    _first_mode,
)

BLIND_13 = "blind_13"
BLIND_14 = "blind_14"
PARTS = (BLIND_13, BLIND_14)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")


def _id(n: int, phase: int, slot: str) -> str:
    return f"r7_{n}_{phase}_{slot}"


# ---------------------------------------------------------------------------------------------------------------
# BLIND_13: a payments platform readied for a new region
# ---------------------------------------------------------------------------------------------------------------

def _blind_13(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # A hyperfine benchmark: the mean beside its spread, user/system times and the range.
    mean, sd = 300 + k + 0.4, 5 + k % 9 + 0.3
    low, high = mean - 2 * sd, mean + 3 * sd
    c = _id(n, phase, "hyperfine")
    items = [fcall(c, "exec_command", cmd=f"hyperfine --runs 10 'node dist/score.js --batch {k}'"),
             fout(c, exec_out(0, f"Benchmark 1: node dist/score.js --batch {k}\n"
                                 f"  Time (mean ± σ):     {mean:.1f} ms ±  {sd:.1f} ms    [User: {mean - 40:.1f} ms, "
                                 f"System: 31.0 ms]\n"
                                 f"  Range (min … max):   {low:.1f} ms … {high:.1f} ms    10 runs"))]
    out.append(Planted("value", f"{mean:.1f}", "benchmark mean", items, [
        ("verbatim", True, True, None),
        ("rounded ms", True, False, Claim(f"score.js batch {k}", f"{mean:.0f} ms mean", f"node dist/score.js "
                                          f"--batch {k} takes {mean:.0f} ms on average over 10 runs.")),
        ("seconds", True, False, Claim(f"score.js batch {k}", f"{mean / 1000:.2f} s avg", f"Scoring batch {k} "
                                       f"takes {mean / 1000:.2f} s per run on average.")),
        ("max as mean", False, False, Claim(f"score.js batch {k}", f"{high:.0f} ms mean", f"node dist/score.js "
                                            f"--batch {k} takes {high:.0f} ms on average.")),
        ("wrong unit", False, False, Claim(f"score.js batch {k}", f"{mean:.0f} µs mean", f"node dist/score.js "
                                           f"--batch {k} takes {mean:.0f} µs on average.")),
        ("dropped", False, False, None),
    ]))

    # A Helm release row: revision, chart and app version in a tab-separated table.
    rev, chart, app = 3 + k % 20, f"payments-api-3.{k % 7}.{phase}", f"2.{k % 11}.0"
    c = _id(n, phase, "helm")
    items = [fcall(c, "exec_command", cmd=f"helm list -n payments --filter payments-{k}"),
             fout(c, exec_out(0, "NAME        \tNAMESPACE\tREVISION\tUPDATED                                \tSTATUS  "
                                 "\tCHART             \tAPP VERSION\n"
                                 f"payments-{k}\tpayments \t{rev}      \t2026-12-0{1 + phase} 09:14:55.123 +0000 UTC\t"
                                 f"deployed\t{chart}\t{app}"))]
    out.append(Planted("value", chart, "helm release", items, [
        ("verbatim", True, True, None),
        ("row", True, False, Claim(f"payments-{k} release", f"rev {rev}, {chart}, app {app}, deployed",
                                   f"Release payments-{k} is deployed at revision {rev} with chart {chart} (app "
                                   f"{app}).")),
        ("chart and revision", True, False, Claim(f"payments-{k} release", f"{chart} @ rev {rev}",
                                                  f"payments-{k} runs chart {chart}, revision {rev}.")),
        ("app as chart", False, False, Claim(f"payments-{k} release", f"chart {app} @ rev {rev}",
                                             f"payments-{k} runs chart version {app}, revision {rev}.")),
        ("wrong revision", False, False, Claim(f"payments-{k} release", f"{chart} @ rev {rev + 1}",
                                               f"payments-{k} runs chart {chart}, revision {rev + 1}.")),
        ("dropped", False, False, None),
    ]))

    # A psql GROUP BY result of three rows: the failed count is the fact.
    failed, paid, pending = 4000 + k * 3, 88000 + k * 11, 600 + k
    day = f"2026-12-0{1 + phase}"
    c = _id(n, phase, "sql")
    items = [fcall(c, "exec_command", cmd=f"psql -d pay -c \"SELECT status, count(*) FROM payouts_{k} WHERE day = "
                                          f"'{day}' GROUP BY status ORDER BY status\""),
             fout(c, exec_out(0, "  status  | count\n----------+-------\n"
                                 f" failed   |  {failed}\n paid     | {paid}\n pending  |   {pending}\n(3 rows)"))]
    out.append(Planted("value", str(failed), "sql group count", items, [
        ("verbatim", True, True, None),
        ("sentence", True, False, Claim(f"payouts_{k} {day}", f"{failed} failed", f"payouts_{k} has {failed} failed "
                                        f"payouts on {day}.")),
        ("separators", True, False, Claim(f"payouts_{k} {day}", f"{failed:,} failed / {paid:,} paid",
                                          f"On {day}, {failed:,} payouts of payouts_{k} failed and {paid:,} were "
                                          "paid.")),
        ("pending as failed", False, False, Claim(f"payouts_{k} {day}", f"{pending} failed",
                                                  f"payouts_{k} has {pending} failed payouts on {day}.")),
        ("dropped", False, False, None),
    ]))

    # An nginx access-log line: a 502 with its request time.
    rt = 30 + phase
    path = f"/v1/refunds/{k}/capture"
    c = _id(n, phase, "access")
    items = [fcall(c, "exec_command", cmd="grep '\" 502 ' /var/log/nginx/access.log | tail -n 1"),
             fout(c, exec_out(0, f"10.0.{phase}.7 - - [07/Dec/2026:10:14:0{phase} +0000] \"POST {path} HTTP/1.1\" "
                                 f"502 173 \"-\" \"okhttp/4.12.0\" rt={rt}.001 upstream=10.2.0.{k % 200}:8080"))]
    out.append(Planted("error", path, "access log 502", items, [
        ("verbatim", True, True, None),
        ("sentence", True, False, Claim(f"refund {k} capture", f"POST {path} -> 502 after {rt} s", f"POST {path} "
                                        f"answers 502 after {rt} seconds (the upstream times out).")),
        ("reason phrase", True, False, Claim(f"refund {k} capture", f"502 Bad Gateway, {rt}.0s", f"Capturing refund "
                                             f"{k} ({path}) fails with Bad Gateway after {rt}.0 s.")),
        ("wrong status", False, False, Claim(f"refund {k} capture", f"POST {path} -> 504", f"POST {path} answers "
                                             "504.")),
        ("generic", False, False, Claim("nginx", "some 5xx in the access log", "The access log shows a few 5xx "
                                        "answers.")),
        ("dropped", False, False, None),
    ]))

    # A Java stack trace: the raising frame, not the callers.
    line = 150 + k % 200
    c = _id(n, phase, "java")
    items = [fcall(c, "exec_command", cmd=f"./gradlew :settle:run --args='--ledger {k}' -q"),
             fout(c, exec_out(1, f"Exception in thread \"main\" java.lang.IllegalStateException: ledger {k} is "
                                 "closed\n\tat com.acme.pay.ledger.Ledger.post(Ledger.java:"
                                 f"{line})\n\tat com.acme.pay.settle.Settler.run(Settler.java:88)\n\tat "
                                 "java.base/java.lang.Thread.run(Thread.java:1583)\n\nFAILURE: Build failed with an "
                                 "exception."))]
    out.append(Planted("error", f"Ledger.java:{line}", "java stack trace", items, [
        ("verbatim", True, True, None),
        ("frame", True, False, Claim("settle job", f"IllegalStateException at Ledger.java:{line}", f"The settle job "
                                     f"throws IllegalStateException (ledger {k} is closed) in Ledger.post at "
                                     f"Ledger.java:{line}.")),
        ("line in words", True, False, Claim("settle job", f"Ledger.java line {line}: ledger {k} closed",
                                             f"Line {line} of Ledger.java throws because ledger {k} is closed.")),
        ("caller line", False, False, Claim("settle job", "IllegalStateException at Settler.java:88", "The settle "
                                            "job throws IllegalStateException at Settler.java:88.")),
        ("generic", False, False, Claim("settle job", "crashes", "The settle job crashes with an exception.")),
        ("dropped", False, False, None),
    ]))

    # A docker image's size in `docker images`' table.
    size = 400 + k
    image_id = f"3f2a9c{k:03d}b1e"
    c = _id(n, phase, "images")
    items = [fcall(c, "exec_command", cmd="docker images payments-api"),
             fout(c, exec_out(0, "REPOSITORY     TAG        IMAGE ID       CREATED       SIZE\n"
                                 f"payments-api   1.{k}.{phase}   {image_id}   2 hours ago   {size}MB\n"
                                 f"payments-api   1.{k}.0-rc1   9b1c04e{k:03d}aa   3 days ago    {size + 230}MB"))]
    out.append(Planted("value", f"{size}MB", "image size", items, [
        ("verbatim", True, True, None),
        ("MB", True, False, Claim(f"payments-api:1.{k}.{phase}", f"{size} MB", f"The payments-api:1.{k}.{phase} "
                                  f"image is {size} MB.")),
        ("GB", True, False, Claim(f"payments-api:1.{k}.{phase}", f"{size / 1000:.2f} GB", f"payments-api "
                                  f"1.{k}.{phase} weighs {size / 1000:.2f} GB.")),
        ("rc size", False, False, Claim(f"payments-api:1.{k}.{phase}", f"{size + 230} MB", f"The "
                                        f"payments-api:1.{k}.{phase} image is {size + 230} MB.")),
        ("wrong unit", False, False, Claim(f"payments-api:1.{k}.{phase}", f"{size} KB", f"The "
                                           f"payments-api:1.{k}.{phase} image is {size} KB.")),
        ("dropped", False, False, None),
    ]))

    # A deploy window the user states in prose: clock times and weekdays.
    start, end = 5 + phase, 8 + phase
    last = DAYS[3 - phase % 2]
    message = (f"Heads-up on payments {k}. Deploys of payments {k} go to prod only between {start:02d}:00 and "
               f"{end:02d}:30 UTC, Monday to {last}.")
    out.append(Planted("constraint", f"deploys of payments {k}", "deploy window", [user_message(message)], [
        ("verbatim", True, True, None),
        ("compact", True, False, Claim(f"payments {k} deploy window", f"{start:02d}:00–{end:02d}:30 UTC, "
                                       f"Mon–{last[:3]}", f"Deploy payments {k} only in {start:02d}:00–{end:02d}:30 "
                                       f"UTC, Monday to {last}.")),
        ("words", True, False, Claim(f"payments {k} deploy window", f"only {start}:00 to {end}:30 UTC, Monday "
                                     f"through {last}", f"Payments {k} may only be deployed from {start}:00 to "
                                     f"{end}:30 UTC, Monday through {last}.")),
        ("wrong end", False, False, Claim(f"payments {k} deploy window", f"{start:02d}:00–{end + 1:02d}:30 UTC, "
                                          f"Mon–{last[:3]}", f"Deploy payments {k} only in "
                                          f"{start:02d}:00–{end + 1:02d}:30 UTC, Monday to {last}.")),
        ("days dropped", False, False, Claim(f"payments {k} deploy window", f"{start:02d}:00–{end:02d}:30 UTC",
                                             f"Deploy payments {k} between {start:02d}:00 and {end:02d}:30 UTC.")),
        ("any time", False, False, Claim(f"payments {k} deploy window", "any time", f"Payments {k} can be "
                                         "deployed whenever it is ready.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# BLIND_14: a search indexer on Kubernetes (kept unread until the end of round seven)
# ---------------------------------------------------------------------------------------------------------------

def _blind_14(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    out: list[Planted] = []

    # go test -bench: ns/op beside B/op and allocs/op.
    ns = 90000 + k * 37
    c = _id(n, phase, "bench")
    items = [fcall(c, "exec_command", cmd=f"go test -run '^$' -bench BenchmarkMerge -benchmem ./internal/merge{k}/"),
             fout(c, exec_out(0, f"goos: linux\ngoarch: amd64\npkg: example.com/search/internal/merge{k}\n"
                                 f"cpu: AMD EPYC 7B13\nBenchmarkMerge-8   \t   12034\t     {ns} ns/op\t    4096 B/op\t"
                                 f"      12 allocs/op\nPASS\nok  \texample.com/search/internal/merge{k}\t2.114s"))]
    out.append(Planted("value", str(ns), "go benchmark", items, [
        ("verbatim", True, True, None),
        ("microseconds", True, False, Claim(f"BenchmarkMerge merge{k}", f"{ns / 1000:.1f} µs/op", f"BenchmarkMerge "
                                            f"de merge{k} tarda {ns / 1000:.1f} µs por operación.")),
        ("separators", True, False, Claim(f"BenchmarkMerge merge{k}", f"{ns:,} ns/op, 12 allocs",
                                          f"En merge{k}, BenchmarkMerge da {ns:,} ns por operación con 12 "
                                          "asignaciones.")),
        ("wrong unit", False, False, Claim(f"BenchmarkMerge merge{k}", f"{ns} ms/op", f"BenchmarkMerge de merge{k} "
                                           f"tarda {ns} ms por operación.")),
        ("bytes as time", False, False, Claim(f"BenchmarkMerge merge{k}", "4096 ns/op", f"BenchmarkMerge de "
                                              f"merge{k} tarda 4096 ns por operación.")),
        ("dropped", False, False, None),
    ]))

    # pip's `Successfully installed` list: the version actually installed.
    ver, core = f"2.{6 + k % 4}.{1 + k % 5}", f"2.18.{k % 4}"
    c = _id(n, phase, "pip")
    items = [fcall(c, "exec_command", cmd=f"pip install -U 'pydantic>=2.6' fastapi -c constraints-{k}.txt"),
             fout(c, exec_out(0, f"Collecting pydantic>=2.6\n  Downloading pydantic-{ver}-py3-none-any.whl (409 kB)\n"
                                 f"Collecting pydantic-core=={core}\n  Downloading pydantic_core-{core}-cp312-cp312-"
                                 "manylinux_2_17_x86_64.whl (2.1 MB)\nInstalling collected packages: pydantic-core, "
                                 f"pydantic, fastapi\nSuccessfully installed fastapi-0.111.{k % 3} pydantic-{ver} "
                                 f"pydantic-core-{core}"))]
    out.append(Planted("value", f"pydantic-{ver}", "installed version", items, [
        ("verbatim", True, True, None),
        ("pin", True, False, Claim(f"constraints-{k}", f"pydantic=={ver}", f"Con constraints-{k}.txt quedó "
                                   f"instalado pydantic=={ver}.")),
        ("words", True, False, Claim(f"constraints-{k}", f"pydantic {ver} (core {core})", f"pip instaló pydantic "
                                     f"{ver} con pydantic-core {core} (constraints-{k}.txt).")),
        ("lower bound", False, False, Claim(f"constraints-{k}", "pydantic 2.6", f"Con constraints-{k}.txt quedó "
                                            "instalado pydantic 2.6.")),
        ("core as pydantic", False, False, Claim(f"constraints-{k}", f"pydantic {core}", f"pip instaló pydantic "
                                                 f"{core} (constraints-{k}.txt).")),
        ("dropped", False, False, None),
    ]))

    # git diff --stat: the totals line.
    ins, dels = 45 + k % 50, 11 + k % 27
    c = _id(n, phase, "stat")
    items = [fcall(c, "exec_command", cmd=f"git diff --stat origin/main...reindex-{k}"),
             fout(c, exec_out(0, f" internal/merge/merge.go      | {ins + dels - 27} +++++++++++++------\n"
                                 " internal/merge/merge_test.go | 24 ++++++--\n cmd/indexer/main.go          |  3 +-\n"
                                 f" 3 files changed, {ins} insertions(+), {dels} deletions(-)"))]
    out.append(Planted("value", f"{ins} insertions", "diff stat", items, [
        ("verbatim", True, True, None),
        ("compact", True, False, Claim(f"reindex-{k} diff", f"+{ins}/-{dels}, 3 files", f"La rama reindex-{k} "
                                       f"cambia 3 archivos: +{ins}/-{dels}.")),
        ("words", True, False, Claim(f"reindex-{k} diff", f"{ins} added, {dels} removed", f"reindex-{k} añade {ins} "
                                     f"líneas y borra {dels} frente a main.")),
        ("swapped", False, False, Claim(f"reindex-{k} diff", f"+{dels}/-{ins}, 3 files", f"La rama reindex-{k} "
                                        f"cambia 3 archivos: +{dels}/-{ins}.")),
        ("files only", False, False, Claim(f"reindex-{k} diff", "3 files changed", f"La rama reindex-{k} toca 3 "
                                           "archivos.")),
        ("dropped", False, False, None),
    ]))

    # An environment dump, then a later `kubectl set env` that changes one of its values. (The variable differs by
    # phase so that each phase's fact has a key of its own: the first run had one name for all three phases, and a
    # later phase's fact replaced the earlier one's truth.)
    var = ("INDEX_REFRESH_MS", "INDEX_FLUSH_MS", "INDEX_MERGE_WAIT_MS")[phase]
    old, new = 1000, 2000 + 250 * (k % 6)
    dump = sorted({"INDEX_BATCH=500", f"INDEX_PATH=/var/lib/search-{k}/idx", f"{var}={old}",
                   f"INDEX_SHARDS={4 + k % 5}"})
    c, s = _id(n, phase, "env"), _id(n, phase, "setenv")
    items = [fcall(c, "exec_command", cmd=f"kubectl exec deploy/indexer-{k} -- env | grep ^INDEX_ | sort"),
             fout(c, exec_out(0, "\n".join(dump))),
             fcall(s, "exec_command", cmd=f"kubectl set env deploy/indexer-{k} {var}={new}"),
             fout(s, exec_out(0, f"deployment.apps/indexer-{k} env updated"))]
    out.append(Planted("value", var, "corrected env", items, [
        ("verbatim", True, True, None),
        ("seconds", True, False, Claim(f"indexer-{k} {var}", f"{new / 1000:g} s (was {old} ms)", f"En indexer-{k}, "
                                       f"{var} vale ahora {new / 1000:g} s; antes era {old}.")),
        ("assignment", True, False, Claim(f"indexer-{k}", f"{var}={new}", f"indexer-{k} corre ahora con "
                                          f"{var}={new}.")),
        ("stale", False, False, Claim(f"indexer-{k}", f"{var}={old}", f"indexer-{k} corre con {var}={old}.")),
        ("wrong unit", False, False, Claim(f"indexer-{k} {var}", f"{new} s", f"En indexer-{k}, {var} vale {new} "
                                           "segundos.")),
        ("dropped", False, False, None),
    ]))

    # A Go panic: the raising frame's line, not its caller's.
    idx, line = 3 + k % 9, 200 + k % 150
    c = _id(n, phase, "panic")
    items = [fcall(c, "exec_command", cmd=f"go run ./cmd/indexer --tenant {k}"),
             fout(c, exec_out(1, f"panic: runtime error: index out of range [{idx}] with length {idx}\n\n"
                                 f"goroutine {17 + phase} [running]:\n"
                                 f"example.com/search/internal/merge.(*Merger).flush(0xc000112000, 0x{idx})\n"
                                 f"\t/src/internal/merge/merge.go:{line} +0x1a4\n"
                                 "example.com/search/internal/merge.(*Merger).Run(...)\n"
                                 "\t/src/internal/merge/merge.go:97 +0x2b\nexit status 2"))]
    out.append(Planted("error", f"merge.go:{line}", "go panic", items, [
        ("verbatim", True, True, None),
        ("frame", True, False, Claim(f"indexer tenant {k}", f"panic index out of range [{idx}] at merge.go:{line}",
                                     f"El indexer del tenant {k} entra en panic: index out of range [{idx}] with "
                                     f"length {idx} en (*Merger).flush, merge.go:{line}.")),
        ("line in words", True, False, Claim(f"indexer tenant {k}", f"merge.go line {line}, index {idx} of {idx}",
                                             f"La línea {line} de merge.go lee el índice {idx} de un slice de "
                                             f"longitud {idx} y provoca el panic.")),
        ("caller line", False, False, Claim(f"indexer tenant {k}", "panic at merge.go:97", f"El indexer del tenant "
                                            f"{k} entra en panic en merge.go:97.")),
        ("generic", False, False, Claim(f"indexer tenant {k}", "panic", f"El indexer del tenant {k} se cae con un "
                                        "panic.")),
        ("dropped", False, False, None),
    ]))

    # A CPU limit the user states casually.
    pct = 30 + 5 * (k % 6)
    message = (f"ok so for the reindex of tenant {k}: keep it under {pct}% CPU on the primary pls, ops pages us "
               "above that")
    out.append(Planted("constraint", f"reindex of tenant {k}", "cpu limit", [user_message(message)], [
        ("verbatim", True, True, None),
        ("compact", True, False, Claim(f"tenant {k} reindex", f"<= {pct}% CPU on primary", f"El reindex del tenant "
                                       f"{k} debe quedarse por debajo del {pct}% de CPU en el primario.")),
        ("max", True, False, Claim(f"tenant {k} reindex", f"max {pct}% CPU (primary)", f"Límite del reindex del "
                                   f"tenant {k}: como máximo {pct}% de CPU en el primario.")),
        ("wrong limit", False, False, Claim(f"tenant {k} reindex", f"<= {pct + 20}% CPU on primary", f"El reindex "
                                            f"del tenant {k} debe quedarse por debajo del {pct + 20}% de CPU en el "
                                            "primario.")),
        ("no limit", False, False, Claim(f"tenant {k} reindex", "full speed", f"El reindex del tenant {k} puede ir "
                                         "a toda velocidad en el primario.")),
        ("dropped", False, False, None),
    ]))

    # kubectl get pods: one pod's restart count.
    restarts = 3 + k % 12
    pod = f"indexer-{k}-5f7c9d-x2x4q"
    c = _id(n, phase, "pods")
    items = [fcall(c, "exec_command", cmd=f"kubectl get pods -l app=indexer-{k} -n search"),
             fout(c, exec_out(0, "NAME                         READY   STATUS    RESTARTS        AGE\n"
                                 f"{pod}    1/1     Running   {restarts} (4m ago)    2d3h\n"
                                 f"indexer-{k}-5f7c9d-p9kw2    1/1     Running   0               2d3h"))]
    out.append(Planted("value", pod, "pod restarts", items, [
        ("verbatim", True, True, None),
        ("restarts", True, False, Claim(pod, f"{restarts} restarts, Running", f"El pod {pod} lleva {restarts} "
                                        "reinicios (el último hace 4 min) y sigue Running.")),
        ("terse", True, False, Claim(pod, f"restarted {restarts}x", f"{pod}: {restarts} reinicios.")),
        ("other pod's", False, False, Claim(pod, "0 restarts", f"El pod {pod} no se ha reiniciado (0 reinicios).")),
        ("wrong count", False, False, Claim(pod, f"restarted {restarts + 5}x", f"{pod}: {restarts + 5} "
                                            "reinicios.")),
        ("dropped", False, False, None),
    ]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Summary styles
# ---------------------------------------------------------------------------------------------------------------

STYLES = {BLIND_13: ("chat", "table3"), BLIND_14: ("es", "jsonl")}


def render(style: str, claims: list[tuple[str, Claim]]) -> str:
    if not claims:
        return "nothing yet"
    if style == "chat":  # a sloppy chat dump: claims on one line, slash-separated, no full stops
        said = [c.sentence.rstrip(".") for _, c in claims]
        half = (len(said) + 1) // 2
        return "catching up on payments: " + " / ".join(said[:half]) + "\nalso " + " / ".join(said[half:])
    if style == "table3":
        return ("| # | topic | what we know |\n|---|---|---|\n"
                + "\n".join(f"| {i} | {c.label} | {c.value} |" for i, (_, c) in enumerate(claims, 1)))
    if style == "es":
        return "Resumen del trabajo hasta ahora:\n\n" + "\n".join(f"- {c.sentence}" for _, c in claims)
    return "\n".join(json.dumps({"topic": c.label, "value": c.value}, ensure_ascii=False) for _, c in claims)


# ---------------------------------------------------------------------------------------------------------------
# Sessions: a careful or sloppy summariser, one to three compactions
# ---------------------------------------------------------------------------------------------------------------

def _build(n: int, part: str, rng: random.Random) -> Session:
    goal = {BLIND_13: f"Get payments {n} ready for the EU region launch.",
            BLIND_14: f"Cut the reindex time of search cluster {n} in half."}[part]
    return build_session(n, part, rng, make={BLIND_13: _blind_13, BLIND_14: _blind_14}[part], goal=goal,
                         phases=1 + (n * 2) % 3, styles=STYLES[part], render=render)


def build_session(n: int, part: str, rng: random.Random, *, make, goal: str, phases: int, styles, render) -> Session:
    """A session of `phases` compactions over the facts `make(n, phase)` plants, summarised in one of `styles` by a
    careful or sloppy summariser (round five's temperaments); round eight builds its part the same way."""
    style = rng.choice(styles)
    temperament = rng.choice(sorted(TEMPERAMENTS))
    session = Session(name=f"{part}-{n}-{temperament}", part=part, style=style)
    goal = user_message(goal)
    window: list[dict] = [AGENTS, goal]
    facts: dict[tuple[str, str], Planted] = {}
    state: dict[tuple[str, str], tuple[str, bool, bool, Claim | None]] = {}
    for phase in range(phases):
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
        seen: set[int] = set()
        in_window = [i for i in before[2:] if any(i is k for k in kept) and not (id(i) in seen or seen.add(id(i)))]
        step.after = [AGENTS, goal, *in_window, user_message(f"{SUMMARY_PREFIX}\n{render(style, claims)}")]
        session.steps.append(step)
        window = step.after
    return session


def sessions(part: str = BLIND_13, count: int = 40, seed: int = 467) -> list[Session]:
    rng = random.Random(f"{seed}-{part}")
    return [_build(n, part, rng) for n in range(1, count + 1)]


GROUPS = {BLIND_13: ("benchmark mean", "helm release", "sql group count", "access log 502", "java stack trace",
                     "image size", "deploy window"),
          BLIND_14: ("go benchmark", "installed version", "diff stat", "corrected env", "go panic", "cpu limit",
                     "pod restarts")}
