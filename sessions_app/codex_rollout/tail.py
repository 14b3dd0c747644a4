"""Reading what a running Codex session has added to its rollout file since last time (issue 13, item 4).

Codex appends one JSON line at a time; a reader may catch a line half written. `read_new_lines` returns only
complete lines (ending in a newline) from a byte offset, and the offset after them, so a partial last line waits
for its newline. `file_change` tells what happened to the file since the stored state: nothing new, new bytes, a
truncation (the file is shorter than what was read) or a replacement (its first line differs: a rotated or
rewritten file). Plain Python, no Django.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

ROLLOUT_NAME = re.compile(r"^rollout-.*\.jsonl$")
READ_CHUNK = 1 << 20

UNCHANGED = "unchanged"
GROWN = "grown"
TRUNCATED = "truncated"
REPLACED = "replaced"


def is_rollout_file(path: Path) -> bool:
    """Codex's own names: `rollout-<time>-<thread id>.jsonl` (spec §15)."""
    return bool(ROLLOUT_NAME.match(path.name))


def head_digest(first_line: bytes) -> str:
    return hashlib.sha256(first_line.rstrip(b"\n")).hexdigest()


def first_line(path: Path, limit: int = 1 << 24) -> bytes | None:
    """The file's first complete line, or None while it has none."""
    with path.open("rb") as fh:
        data = fh.readline(limit)
    return data if data.endswith(b"\n") else None


@dataclass(frozen=True)
class NewLines:
    lines: list[bytes]  # complete lines, each ending in b"\n"
    offset: int  # the byte offset after the last complete line


def read_new_lines(path: Path, offset: int) -> NewLines:
    """Complete lines from `offset` on; a partial last line is left for next time."""
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n")
    if end < 0:
        return NewLines([], offset)
    complete = data[: end + 1]
    return NewLines(complete.splitlines(keepends=True), offset + len(complete))


def file_change(path: Path, *, offset: int, head: str) -> str:
    """What happened to the file since `offset` bytes were read from a file whose first line hashed to `head`."""
    size = path.stat().st_size
    line = first_line(path)
    if head and (line is None or head_digest(line) != head):
        return REPLACED
    if size < offset:
        return TRUNCATED
    if size == offset:
        return UNCHANGED
    return GROWN
