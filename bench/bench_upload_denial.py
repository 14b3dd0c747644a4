"""Benchmark: `/healthz` while anonymous clients upload a gigabyte to a real Daphne process (issue 27).

One Daphne (`python -m daphne compactweb.asgi:application`, SQLite, a private var dir) on a free port. The floor is
`/healthz` probed on the idle process; then the same probes run while another client uploads without pause, in
turn: a 1 GB body with its Content-Length, a 1 GB chunked body and a 70 MB urlencoded form (before issue 27 the
form froze the process for a minute). For each upload the bench also reports how many bytes the client got into
the socket before the server stopped taking them.

    .venv/bin/python bench/bench_upload_denial.py                 # prints the table (about 20 s)
    .venv/bin/python bench/bench_upload_denial.py --write         # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.doc_section import write_section  # noqa: E402
from tests.compactweb.test_daphne_body import UPLOADS, _healthz, _status, _upload, running_daphne  # noqa: E402

SECTION = "## Uploads refused before they are read"
NAMES = ("1 GB, Content-Length", "1 GB, chunked", "70 MB urlencoded form")


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=60)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="upload-denial-") as tmp, running_daphne(Path(tmp)) as port:
        floor = [_healthz(port)[1] for _ in range(args.probes)]
        stop, done = threading.Event(), []

        def upload_until_stopped() -> None:
            while not stop.is_set():
                done.append((len(done) % len(UPLOADS), _upload(port, **UPLOADS[len(done) % len(UPLOADS)])))

        uploader = threading.Thread(target=upload_until_stopped, daemon=True)
        uploader.start()
        loaded = []
        while len(loaded) < args.probes or len(done) < 2 * len(UPLOADS):
            loaded.append(_healthz(port)[1])
        stop.set()
        uploader.join(timeout=120)
    sent = {i: max(o["sent"] for k, o in done if k == i) for i in range(len(UPLOADS))}
    answers = {i: sorted({"413" if _status(o["response"]) == 413 else f"{_status(o['response'])}"
                          if _status(o["response"]) else "reset before the 413 was read"
                          for k, o in done if k == i}) for i in range(len(UPLOADS))}
    ms = 1000
    table = [
        f"{platform.python_implementation()} {platform.python_version()}, SQLite, {os.cpu_count()} cores shared; "
        f"{len(floor)} probes idle, {len(loaded)} during {len(done)} uploads.",
        "",
        "| `/healthz` | median (ms) | p95 (ms) | max (ms) | median × floor |",
        "|---|---:|---:|---:|---:|",
        f"| floor: idle process | {statistics.median(floor) * ms:.1f} | {_percentile(floor, .95) * ms:.1f} | "
        f"{max(floor) * ms:.1f} | 1.0 |",
        f"| during the uploads | {statistics.median(loaded) * ms:.1f} | {_percentile(loaded, .95) * ms:.1f} | "
        f"{max(loaded) * ms:.1f} | {statistics.median(loaded) / statistics.median(floor):.1f} |",
        "",
        "| upload | most bytes the client got into the socket | answers seen |",
        "|---|---:|---|",
        *(f"| {NAMES[i]} | {sent[i] / 1024**2:.1f} MB | {', '.join(answers[i])} |" for i in range(len(UPLOADS))),
    ]
    print("\n".join(table))
    if args.write:
        block = (f"{SECTION}\n\n`bench/bench_upload_denial.py` (issue 27): a real Daphne process, `/healthz` probed "
                 "idle (the floor) and while another client uploads without pause a 1 GB body (declared, then "
                 "chunked) and a 70 MB urlencoded form to it. The request limit is 1 MiB here "
                 "(`COMPACTWEB_MAX_REQUEST_BYTES`); what a client gets into the socket beyond it is the kernel's "
                 "buffers. Target: `/healthz` median under 100 ms and no worse than the floor's order. Measured on the 2-core "
                 f"machine shared with other test runs (load average {os.getloadavg()[0]:.1f} at the end of the run): the "
                 "tails, the floor's too, follow that load. The test (tests/compactweb/test_daphne_body.py) asserts "
                 "that every probe during the uploads answers, not how fast: the speed is this bench's. Before issue 27 the 70 MB form alone froze the process for 64 s.\n\n" + "\n".join(table) + "\n")
        write_section(SECTION, block)


if __name__ == "__main__":
    main()
