"""Reading what a running Codex session has added to its rollout file since last time (issue 13, item 4).

Codex appends one JSON line at a time; a reader may catch a line half written. `read_new_lines` returns only
complete lines (ending in a newline) from a byte offset, and the offset after them, so a partial last line waits
for its newline. `file_change` tells what happened to the file since the stored state: nothing new, new bytes, or
a rewrite (the content no longer extends what was read: another inode under the name, a shorter file, or other
bytes just before the offset read so far). The check costs a stat and one read of at most TAIL_BYTES, whatever
the size of the file (issue 30). `common_prefix` then tells how much of what was read the new content still
starts with. Plain Python, no Django.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROLLOUT_NAME = re.compile(r"^rollout-.*\.jsonl$")
READ_CHUNK = 1 << 20
# The bytes just before the offset read so far that must still be there for the file to count as the same one.
TAIL_BYTES = 4096

UNCHANGED = "unchanged"
GROWN = "grown"
REWRITTEN = "rewritten"


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
    tail: str = ""  # tail_digest at `offset`, from the same read
    inode: int = 0  # the inode of the file read


def read_new_lines(path: Path, offset: int, limit: int | None = None) -> NewLines:
    """Complete lines from `offset` on; a partial last line is left for next time. The TAIL_BYTES before `offset`
    are read too, for the digest of the new end (one open file: the lines, the digest and the inode agree).
    `limit` bounds the bytes read (a longer first line is still read whole)."""
    start = max(0, offset - TAIL_BYTES)
    with path.open("rb") as fh:
        inode = os.fstat(fh.fileno()).st_ino
        fh.seek(start)
        if limit is None:
            data = fh.read()
        else:
            data = fh.read(offset - start + limit)
            if b"\n" not in data[offset - start:]:
                data += fh.readline()
    before, data = data[: offset - start], data[offset - start:]
    end = data.rfind(b"\n")
    if end < 0:
        return NewLines([], offset, _digest(before), inode)
    complete = data[: end + 1]
    tail = complete[-TAIL_BYTES:] if len(complete) >= TAIL_BYTES else (before + complete)[-TAIL_BYTES:]
    return NewLines(complete.splitlines(keepends=True), offset + len(complete), _digest(tail), inode)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tail_digest(path: Path, offset: int) -> str:
    """SHA-256 of the TAIL_BYTES (or fewer) bytes before `offset`: what a later read checks is still there."""
    start = max(0, offset - TAIL_BYTES)
    with path.open("rb") as fh:
        fh.seek(start)
        data = fh.read(offset - start)
    return _digest(data)


@dataclass(frozen=True)
class ReadState:
    """How far a file was read: bytes consumed, the digest of the bytes before that point, the file's inode."""

    offset: int
    tail: str
    inode: int


def file_change(path: Path, *, state: ReadState) -> str:
    """What happened to the file since `state`: UNCHANGED, GROWN (the new bytes extend what was read) or
    REWRITTEN (another file under the name, cut back, or the bytes before the offset differ)."""
    st = path.stat()
    if state.inode and st.st_ino != state.inode:
        return REWRITTEN
    if st.st_size < state.offset:
        return REWRITTEN
    if state.tail and tail_digest(path, state.offset) != state.tail:
        return REWRITTEN
    return UNCHANGED if st.st_size == state.offset else GROWN


@dataclass(frozen=True)
class Prefix:
    lines: int  # how many complete lines of the file equal the kept lines, from the first
    offset: int  # the byte offset after them


def common_prefix(path: Path, kept: Iterable[str]) -> Prefix:
    """How many of the file's complete lines, from the first, equal `kept` (the lines read before, as text
    without their newline). Reads the file once; runs only after a rewrite."""
    lines = offset = 0
    kept_lines = iter(kept)
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            before = next(kept_lines, None)
            text = raw[:-1].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
            if before is None or before != text:
                break
            lines += 1
            offset += len(raw)
    return Prefix(lines, offset)
