"""Rollout files shipped from another machine (issue 30): the server side of `follow_rollouts --to URL`.

A shipper on a laptop or CI runner follows its Codex sessions folder and sends each file's new complete lines,
with the byte offset they start at, over the JSON API. The file is kept as a followed CodexSource whose `path` is
`shipped:<user id>:<the shipper's file key>`, so one user's files never meet another's. An append is applied only
at the offset stored (in the same transaction as the lines), so it is idempotent: a batch sent twice (an answer
lost to a network outage, a restart of either side) is refused with `409 offset_mismatch` naming the offset the
server has, and the shipper goes on from there. Nothing is lost and nothing is read twice. The first batch of a
file imports it (it must begin with the file's first line); later batches append, exactly as a local follower
does (sessions_app.transfer.follow.do_append_followed_lines). A line past COMPACTWEB_MAX_IMPORT_LINE_BYTES refuses
its batch, as the import and the local follower refuse it.

A shipped file that became shorter than what the server has was rewritten: the shipper sends it again from byte
0 with `replaces` (the offset the server had). As a local follower does with a rewrite that shares nothing with
what it read, the file is then followed as a new session linked to the old one (`continues`, under a new thread
id when the old one holds the file's), and the old session keeps what it had; the rewrite is recorded on the old
file's CodexSource (`events`, shown on its session page). `replaces` must equal the server's offset, so a
rewrite batch sent twice (its answer lost) is refused with 409 offset_mismatch like any repeated batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from sessions_app.codex_rollout import RolloutImportError
from sessions_app.models import CodexSource
from sessions_app.transfer.follow import (
    do_append_followed_lines,
    import_followed,
    long_line_refusal,
    record_file_event,
)
from sessions_app.transfer.importer import FollowedFile
from sessions_app.transfer.refusals import AlreadyImported, OffsetMismatch, TransferRefused

MAX_FILE_KEY = 900


@dataclass(frozen=True)
class Shipped:
    file: str
    offset: int  # the bytes of the file the server has, after this batch
    session: int | None
    lines: int  # lines taken from this batch


@dataclass(frozen=True)
class _Batch:
    """One received batch of a shipped file with whose it is: what importing or appending it reads."""

    key: str  # the file's CodexSource path
    file: str
    name: str
    lines: list[bytes]
    data: bytes
    user: object
    provider: object
    policy: object


def _key(user, file: str) -> str:
    if not file or len(file) > MAX_FILE_KEY or "\x00" in file:
        raise TransferRefused(f"file: a key of 1 to {MAX_FILE_KEY} characters naming the shipped file")
    return f"shipped:{user.pk}:{file}"


def shipped_offset(*, user, file: str) -> Shipped:
    """How much of a shipped file the server has (0 and no session for a file it has not seen)."""
    source = CodexSource.objects.filter(path=_key(user, file), followed=True).values_list("offset", "session_id").first()
    return Shipped(file=file, offset=source[0] if source else 0, session=source[1] if source else None, lines=0)


def _mismatch(file: str, have: int, offset: int) -> TransferRefused:
    return OffsetMismatch(f"{file}: the server has {have} bytes of this file, the batch starts at byte {offset}; "
                           f"send from byte {have}")


def do_receive_shipped_lines(*, user, file: str, offset: int, data: bytes, name: str = "", provider=None,
                             policy=None, replaces: int | None = None) -> Shipped:
    """Take one batch of a shipped file's complete lines starting at byte `offset` (see the module docstring)."""
    key = _key(user, file)
    if not data:
        raise TransferRefused("data: no lines in the batch")
    if not data.endswith(b"\n"):
        raise TransferRefused("data: send complete lines only (the batch must end with a newline)")
    lines = data.splitlines(keepends=True)
    source = CodexSource.objects.filter(path=key, followed=True).first()
    too_long = long_line_refusal(lines, first_number=source.line_count + 1 if source and replaces is None else 1,
                                 name=name or file)
    if too_long is not None:
        raise TransferRefused(str(too_long), code="invalid_rollout")
    batch = _Batch(key=key, file=file, name=name, lines=lines, data=data, user=user, provider=provider,
                   policy=policy)
    if replaces is not None:
        return _replace(batch, source=source, replaces=replaces, offset=offset)
    if source is None:
        if offset != 0:
            raise _mismatch(file, 0, offset)
        return _import(batch)
    with transaction.atomic():
        locked = CodexSource.objects.select_for_update().get(pk=source.pk)
        if locked.offset != offset:
            raise _mismatch(file, locked.offset, offset)
        count = do_append_followed_lines(source=locked, lines=lines)
        end = offset + len(data)
        CodexSource.objects.filter(pk=locked.pk).update(offset=end, updated_at=timezone.now())
    return Shipped(file=file, offset=end, session=locked.session_id, lines=count)


def _replace(batch: _Batch, *, source: CodexSource | None, replaces: int, offset: int) -> Shipped:
    """A rewritten shipped file: its first batch becomes a new session linked to the old one (module docstring)."""
    key, file = batch.key, batch.file
    have = source.offset if source is not None else 0
    if offset != 0 or have != replaces:
        raise _mismatch(file, have, offset)
    assert source is not None
    with transaction.atomic():
        if CodexSource.objects.filter(pk=source.pk, path=key).update(path="") != 1:  # a racing rewrite got it
            raise _mismatch(file, shipped_offset(user=batch.user, file=file).offset, offset)
    try:
        result = _import(batch, continues=source.session)
    except BaseException:
        CodexSource.objects.filter(pk=source.pk).update(path=key)  # refused: the old file stays followed
        raise
    record_file_event(source, action="new_session", session_id=result.session, detail=(
        f"the shipped file was rewritten (now shorter than the {replaces} bytes received); session "
        f"{source.session_id} keeps its {source.line_count} lines and the file is followed as session "
        f"{result.session}"))
    return result


def _import(batch: _Batch, continues=None) -> Shipped:
    key, file, lines, data = batch.key, batch.file, batch.lines, batch.data
    try:
        result = import_followed(
            lines=lines, source_name=batch.name or file.rsplit("/", 1)[-1], provider=batch.provider,
            policy=batch.policy, actor=batch.user,
            followed=FollowedFile(path=key, state={"offset": len(data)}, continues=continues),
        )
    except AlreadyImported:
        have = CodexSource.objects.filter(path=key, followed=True).values_list("offset", flat=True).first()
        if have is not None:  # the same first batch, sent again or by a racing request: it is in
            raise _mismatch(file, have, 0) from None
        raise
    except RolloutImportError as exc:
        raise TransferRefused(str(exc), code="invalid_rollout") from None
    return Shipped(file=file, offset=len(data), session=result.session.pk, lines=len(lines))
