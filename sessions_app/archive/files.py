"""The archive files: gzip-compressed JSON Lines whose decompressed bytes are exactly a session's export.

A file is written under a temporary name, flushed and fsynced, read back and hashed, and only then linked to its
final name (which never replaces an existing file) and its folder synced. Any failure removes the temporary file
and raises, so a caller never records (or removes a session for) a file that is not on disk and whole.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

READ_CHUNK = 1 << 16
# Level 6 (gzip's default) compresses JSON Lines about as well as 9 at a third of the time.
COMPRESS_LEVEL = 6


class ArchiveWriteFailed(RuntimeError):
    """The archive file could not be written or did not read back as written: nothing was kept."""


class ArchiveFileBad(RuntimeError):
    """An archive file to restore is missing, unreadable or no longer what its record says."""


@dataclass(frozen=True)
class Written:
    relative: str
    sha256: str
    lines: int
    export_bytes: int
    compressed_bytes: int


def _line_count(size: int, newlines: int, last: bytes) -> int:
    return newlines + (1 if size and last != b"\n" else 0)


@dataclass
class _Tally:
    digest: Any  # a hashlib object
    size: int = 0
    newlines: int = 0
    last: bytes = b""

    def add(self, data: bytes) -> None:
        if data:
            self.digest.update(data)
            self.size += len(data)
            self.newlines += data.count(b"\n")
            self.last = data[-1:]

    @property
    def lines(self) -> int:
        return _line_count(self.size, self.newlines, self.last)


def read_back(path: Path) -> tuple[str, int, int]:
    """(sha256, lines, bytes) of a gzip file's decompressed content, read a chunk at a time."""
    tally = _Tally(hashlib.sha256())
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            tally.add(chunk)
    return tally.digest.hexdigest(), tally.lines, tally.size


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unique_name(*, folder: str, export_name: str) -> str:
    """`folder/<export name without .jsonl>.<random>.jsonl.gz`: the random part keeps two attempts at the same
    session (a retry, two archivers racing) from ever sharing or replacing a file."""
    stem = export_name[: -len(".jsonl")] if export_name.endswith(".jsonl") else export_name
    return f"{folder}/{stem}.{secrets.token_hex(4)}.jsonl.gz"


def write_archive(*, directory: Path, relative: str, lines: Iterable[str]) -> Written:
    """Write `lines` (str, each with its own line break as the export gives them) gzip-compressed to
    `directory/relative`, verified as described in the module docstring. Raises ArchiveWriteFailed (or the
    exporter's own error) with nothing left behind."""
    final = directory / relative
    partial = final.with_name(final.name + ".partial")
    linked = False
    try:
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tally = _Tally(hashlib.sha256())
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as raw:
            # No name and a zero time in the gzip header: the same export always gives the same file.
            with gzip.GzipFile(
                filename="", mode="wb", fileobj=raw, compresslevel=COMPRESS_LEVEL, mtime=0
            ) as gz:
                for line in lines:
                    data = line.encode("utf-8")
                    tally.add(data)
                    gz.write(data)
            raw.flush()
            os.fsync(raw.fileno())
        sha256, count, size = read_back(partial)
        if (sha256, count, size) != (tally.digest.hexdigest(), tally.lines, tally.size):
            raise ArchiveWriteFailed(f"{relative} did not read back as written")
        os.link(partial, final)  # never replaces a file already there
        linked = True
        os.unlink(partial)
        _sync_dir(final.parent)
        return Written(
            relative=relative,
            sha256=sha256,
            lines=count,
            export_bytes=size,
            compressed_bytes=final.stat().st_size,
        )
    except BaseException as exc:
        if linked:
            final.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ArchiveWriteFailed(f"could not write {relative}: {exc}") from exc
        raise
    finally:
        with contextlib.suppress(OSError):  # e.g. its folder could not be made: there is nothing to remove
            partial.unlink(missing_ok=True)


# A file the archiver writes is recorded within seconds (its session's transaction right after the write); one
# older than this with no record was left by a run that was killed (issue 42), never by one still running.
UNRECORDED_GRACE_SECONDS = 600


def unrecorded_files(*, directory: Path, recorded: set[str], now: float,
                     grace: float = UNRECORDED_GRACE_SECONDS) -> list[str]:
    """The archive files (and the temporary files of an unfinished write) under `directory` that no record names
    (`recorded`: relative names) and that are older than `grace` seconds: what a killed run left behind."""
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or not path.name.endswith((".jsonl.gz", ".jsonl.gz.partial")):
            continue
        relative = path.relative_to(directory).as_posix()
        if relative not in recorded and path.stat().st_mtime <= now - grace:
            found.append(relative)
    return found


def remove(*, directory: Path, relative: str) -> None:
    """Remove a file this run wrote for a session it then did not remove (its database step failed)."""
    (directory / relative).unlink(missing_ok=True)


def verified_chunks(*, directory: Path, relative: str, sha256: str) -> Iterator[bytes]:
    """The decompressed file a chunk at a time, after checking it hashes to `sha256` (a first pass): a file that
    changed since it was archived is refused before anything of it is imported."""
    path = directory / relative
    try:
        found, _, _ = read_back(path)
    except (OSError, EOFError) as exc:  # missing, unreadable, or not (whole) gzip
        # The reason without the OS's file name: that is the server's absolute path, not the admin's business.
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ArchiveFileBad(f"{relative} cannot be read: {why}") from exc
    if found != sha256:
        raise ArchiveFileBad(f"{relative} does not match its record (sha256 {found}, recorded {sha256})")
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            yield chunk
