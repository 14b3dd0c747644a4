"""Benchmark: hostile Claude Code transcripts are read in linear time and bounded memory (issue 44).

The transcript reader (sessions_app.claude_transcript, plain Python: what the import, the page, the shipper and the
follower all run) reads, in the same process and run:
- the floor: an ordinary transcript of N entries, each continuing the previous one;
- the hostile one: a chain of N/2 entries, then N/2 entries each going back to one of the chain's last two entries
  alternately (a rewind on every line, to a deep entry: taken as written, each would copy the whole chain);
- both again at 2N: a linear reader takes twice the time, a quadratic one four times;
- the issue's 4-line file reusing a uuid (it used to loop forever).
Time per line and peak memory (tracemalloc) are given beside the floor's, as ratios measured in the same run.

    .venv/bin/python bench/bench_hostile_transcripts.py            # prints the table (a few seconds)
    .venv/bin/python bench/bench_hostile_transcripts.py --write    # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.doc_section import write_section  # noqa: E402
from sessions_app.claude_transcript import TranscriptReader  # noqa: E402

SECTION = "## Hostile Claude Code transcripts (issue 44)"
SESSION = "7d4c2a0e-5b1f-4c3e-9a8d-2f6e1b0c9d71"
TEXT = "the parser keeps line {0} of the loader notes as it was read; " * 4


def entry(uuid: str, parent: str | None, n: int) -> bytes:
    kind = "user" if n % 2 == 0 else "assistant"
    message = ({"role": "user", "content": TEXT.format(n)} if kind == "user" else
               {"id": f"msg_{uuid}", "role": "assistant", "content": [{"type": "text", "text": TEXT.format(n)}]})
    return json.dumps({"parentUuid": parent, "isSidechain": False, "type": kind, "message": message, "uuid": uuid,
                       "timestamp": "2026-12-02T22:00:00.000Z", "sessionId": SESSION}).encode() + b"\n"


def ordinary(n: int) -> list[bytes]:
    return [entry(f"n{i}", f"n{i - 1}" if i else None, i) for i in range(n)]


def hostile(n: int) -> list[bytes]:
    half = n // 2
    chain = ordinary(half)
    return chain + [entry(f"r{i}", f"n{half - 1 - i % 2}", half + i) for i in range(n - half)]


def timed(lines: list[bytes]) -> tuple[float, int]:
    """(seconds, lines written) of reading `lines` with one reader."""
    start = time.perf_counter()
    chunk = TranscriptReader().feed(lines, first_line_no=1)
    return time.perf_counter() - start, len(chunk.lines)


def peak_memory(lines: list[bytes]) -> int:
    """Peak bytes allocated while reading `lines` (a run of its own: tracemalloc slows the reader down)."""
    tracemalloc.start()
    TranscriptReader().feed(lines, first_line_no=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def best(lines: list[bytes], rounds: int) -> tuple[float, int, int]:
    runs = [timed(lines) for _ in range(rounds)]
    return min(r[0] for r in runs), peak_memory(lines), runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    n = args.lines
    results = {}
    for name, build in (("ordinary (the floor)", ordinary), ("rewinding on every line", hostile)):
        for size in (n, 2 * n):
            lines = build(size)
            results[(name, size)] = (*best(lines, args.rounds), sum(map(len, lines)))
    reused = [entry("a", None, 0), entry("b", "a", 1), entry("a", "b", 2), entry("c", "b", 3)]
    four = best(reused, args.rounds)

    floor_time, floor_peak = results[("ordinary (the floor)", n)][:2]
    rows = ["| transcript | lines | file | time per line | × floor | peak memory | × floor | lines written |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (name, size), (seconds, peak, written, size_bytes) in results.items():
        rows.append(f"| {name} | {size:,} | {size_bytes / 1e6:.1f} MB | {seconds / size * 1e6:.1f} µs | "
                    f"{seconds / size / (floor_time / n):.2f} | {peak / 1e6:.1f} MB | {peak / floor_peak:.2f} | "
                    f"{written:,} |")
    growth = {name: results[(name, 2 * n)][0] / results[(name, n)][0]
              for name in ("ordinary (the floor)", "rewinding on every line")}
    block = "\n".join([
        SECTION, "",
        f"`bench/bench_hostile_transcripts.py`: the transcript reader alone (plain Python, what every path runs), best "
        f"of {args.rounds} runs each, {sys.version.split()[0]}.", "",
        *rows, "",
        f"Doubling the lines multiplies the time by {growth['ordinary (the floor)']:.2f} for the floor and by "
        f"{growth['rewinding on every line']:.2f} for the file rewinding on every line (a quadratic reader: 4). The "
        "rewinds past the limit (16 times the bytes read plus 8 MiB of copied history) are skipped and reported; "
        f"the issue's 4-line file reusing a uuid is read in {four[0] * 1e6:.0f} µs.", ""])
    print(block)
    if args.write:
        write_section(SECTION, block)


if __name__ == "__main__":
    main()
