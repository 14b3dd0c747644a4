"""Seed a set's bytecode cache (PYTHONPYCACHEPREFIX) with the bytecode already compiled beside the sources (issue 42).

scripts/scale-out gives every Python start of a set `PYTHONPYCACHEPREFIX=<run dir>/pycache`, so that a host that
forbids writing bytecode into the tree still keeps one. But with a prefix Python reads bytecode only from there: the
`__pycache__` directories beside the sources (the standard library's, a virtualenv installed with compiled bytecode,
uv's `--compile-bytecode`) are ignored, and a set's first start compiled its ~1,600 modules again (a worker 4.0-4.6
s of CPU to ready against 1.7 s with bytecode). This links (or copies, across file systems) each
`<dir>/__pycache__/<name>.<tag>.pyc` whose source `<dir>/<name>.py` exists to where Python looks for it under the
prefix (`importlib.util.cache_from_source`'s rule: the prefix, then the source's absolute directory). A seeded file
is checked like any other (the source's mtime and size in its header): a stale one is compiled again and replaced
in the prefix, never in the tree. A link that exists already is left alone.

Walking the standard library and a virtualenv reads ~20,000 files (about 1 s of CPU), so each root is walked once:
`<prefix>/seeded` lists the roots walked with their mtimes (an install into a root changes its mtime), and the
launcher runs this only when a root's mtime differs (`stale_roots`). Plain Python, no Django.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

MARKER = "seeded"
SKIPPED = {"node_modules", "var"}


def in_prefix(prefix: Path, source: Path) -> Path:
    """Where Python looks for `source`'s bytecode under `prefix` (importlib's cache_from_source with a prefix)."""
    source = Path(os.path.abspath(source))
    return prefix / str(source.parent).lstrip(os.sep) / f"{source.stem}.{sys.implementation.cache_tag}.pyc"


def compiled_beside_sources(root: Path, *, tag: str | None = None) -> Iterator[tuple[Path, Path]]:
    """(bytecode, its source) for each `__pycache__/<name>.<tag>.pyc` under `root` whose `<name>.py` exists
    (optimised variants, `.opt-1.pyc`, are not what a plain start reads)."""
    suffix = f".{tag or sys.implementation.cache_tag}.pyc"
    for directory, subdirectories, files in os.walk(root):
        if os.path.basename(directory) != "__pycache__":
            # not the project's git data, JavaScript packages or run directories (a set's own bytecode cache)
            subdirectories[:] = [name for name in subdirectories if name not in SKIPPED and not name.startswith(".")]
            continue
        subdirectories.clear()
        parent = Path(directory).parent
        for name in files:
            if name.endswith(suffix):
                source = parent / f"{name[:-len(suffix)]}.py"
                if source.is_file():
                    yield Path(directory) / name, source


def seed(prefix: Path, roots: Iterable[Path]) -> int:
    """Link the bytecode compiled beside the sources under `roots` into `prefix`; how many files were added."""
    added = 0
    for root in roots:
        for compiled, source in compiled_beside_sources(root):
            target = in_prefix(prefix, source)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(compiled, target)
            except FileExistsError:  # a set's process compiled it meanwhile
                continue
            except OSError:  # another file system, or links not allowed
                shutil.copyfile(compiled, target)
            added += 1
    return added


def import_roots() -> list[Path]:
    """The directories this interpreter imports from: sys.path's existing directories, among them the project's
    own (the current directory, where the launcher runs; a test run writes its bytecode there, scripts/test)."""
    roots = []
    for entry in sys.path:
        path = Path(os.path.abspath(entry or "."))
        if path.is_dir() and path not in roots:
            roots.append(path)
    return roots


def mtime(root: Path) -> str:
    return str(int(root.stat().st_mtime))


def record(prefix: Path, roots: Iterable[Path]) -> None:
    """Write `<prefix>/seeded`: one `mtime<TAB>root` line per root walked (whole seconds: what the launcher's
    `stat -c %Y` compares without starting Python)."""
    lines = [f"{mtime(root)}\t{root}\n" for root in roots]
    (prefix / MARKER).write_text("".join(lines))


def stale_roots(prefix: Path, roots: Iterable[Path]) -> list[Path]:
    """The roots not walked yet, or changed since (their mtime differs from `<prefix>/seeded`'s)."""
    try:
        seen = dict(reversed(line.split("\t", 1)) for line in (prefix / MARKER).read_text().splitlines())
    except (OSError, ValueError):
        seen = {}
    return [root for root in roots if seen.get(str(root)) != mtime(root)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", required=True, help="the PYTHONPYCACHEPREFIX to seed")
    args = parser.parse_args(argv)
    prefix = Path(args.prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    roots = import_roots()
    stale = stale_roots(prefix, roots)
    if stale:
        added = seed(prefix, stale)
        record(prefix, roots)
        print(f"bytecode: {added} compiled file(s) beside the sources of {len(stale)} import root(s) linked into "
              f"the set's cache", flush=True)
    else:
        print("bytecode: the set's cache was seeded from every import root as it is now", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
