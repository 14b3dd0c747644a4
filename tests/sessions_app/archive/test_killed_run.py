"""An archiver run killed at any step (issue 42) leaves nothing the next run does not clean: the run is forked and
the child SIGKILLs itself (os._exit: no except, no finally, as a kill -9) at each step of archiving a session;
then the next run removes the file it wrote and never recorded (once older than the grace), archives the session,
and loses nothing: the session is either archived once (its record names the one file left) or still there.
PostgreSQL only (the child needs a database of its own process); the SQLite pass skips with that reason."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest
from django.db import connection, connections

from sessions_app.archive import files, services
from sessions_app.models import Session, SessionArchive

# Where the child dies: each a function of the archive's path that the run calls at that step.
STEPS = {
    "writing the file": ("read_back", files),  # the temporary file written and synced, not yet read back
    "linking it": ("_sync_dir", files),  # the final name linked, the temporary one removed, the folder not synced
    "recording it": ("_remove_session_rows", services),  # inside the transaction that records it, before commit
}


def _killed_at(step: str, directory: Path) -> None:
    name, module = STEPS[step]
    real = getattr(module, name)

    def die(*args, **kwargs):
        if name == "read_back":
            real(*args, **kwargs)
        os._exit(9)

    setattr(module, name, die)
    services.do_run_archiver(trigger="test", directory=directory)
    os._exit(0)  # not reached


def _archive_files(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def _age_files(directory: Path, seconds: float) -> None:
    old = time.time() - seconds
    for path in directory.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_run_killed_at_each_step_leaves_nothing_the_next_run_does_not_clean(ended_session, archive_dir, step,
                                                                                export_bytes):
    if connection.vendor != "postgresql":
        pytest.skip("the killed run is a forked process with its own connection: checked in the PostgreSQL pass")
    exported = export_bytes(ended_session)
    connections.close_all()  # the child opens its own
    child = multiprocessing.get_context("fork").Process(target=_killed_at, args=(step, archive_dir))
    child.start()
    child.join(120)
    assert child.exitcode == 9, child.exitcode
    assert Session.objects.filter(pk=ended_session.pk).exists()  # nothing was removed without its record
    assert not SessionArchive.objects.exists()
    left = _archive_files(archive_dir)
    assert left  # the killed run left its file (or its temporary file) behind

    assert services.sweep_unrecorded(directory=archive_dir) == []  # too young: a running archiver's, maybe
    _age_files(archive_dir, files.UNRECORDED_GRACE_SECONDS + 1)
    run = services.do_run_archiver(trigger="test", directory=archive_dir)

    assert run.detail["swept"] == left and run.archived == 1
    record = SessionArchive.objects.get()
    assert _archive_files(archive_dir) == [record.file_name]  # the one file left is the recorded one
    assert not Session.objects.filter(pk=ended_session.pk).exists()
    restored = services.do_restore_archive(archive_id=record.pk)
    assert export_bytes(restored.session) == exported
