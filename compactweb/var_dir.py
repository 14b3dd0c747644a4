"""The embedded default's var/ directory is private to the account that runs compactweb (issue 14): the directory
0700, the SQLite database, its secret key and other files 0600, so another user of a shared host reads nothing."""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def secure_dir(path: Path) -> Path:
    """Create `path` (and parents) if missing and make it 0700 when this process owns it."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    _chmod_if_owned(path, DIR_MODE)
    return path


def secure_file(path: Path) -> Path:
    """Create `path` empty if missing (so SQLite never creates it with the umask's mode) and make it 0600."""
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, FILE_MODE)
        os.close(fd)
    _chmod_if_owned(path, FILE_MODE)
    return path


def _chmod_if_owned(path: Path, mode: int) -> None:
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o777 != mode:
            path.chmod(mode)
    except OSError:
        pass  # a read-only mount or another owner: leave it as the operator set it
