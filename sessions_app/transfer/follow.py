"""Live follow of a Codex sessions folder or a Claude Code projects folder (issue 13, item 4; issue 30; issue 35;
design user story 8). A Claude Code transcript is imported like a rollout (the importer tells the formats apart);
its appended lines go through sessions_app.transfer.claude_follow.

`sync_file` brings one `rollout-*.jsonl` file up to date: a new file (once it has a complete first line) is
imported as a session with source "followed" (tolerant, like any import), and lines Codex appends later are
appended to that session's rollout as they arrive; a partial last line waits for its newline. The read state
(byte offset, a digest of the bytes before it, the inode) is stored with the lines in the same transaction, so a
restarted follower resumes where it stopped, with no duplicates. Checking a file costs a stat and one read of at
most TAIL_BYTES; appending a line costs work proportional to that line (the history is read only for the rare
lines whose conversion needs it: a thread rollback, a compaction without its replacement history).

A file whose content no longer extends what was read (rewritten in place, cut back, or another file saved under
the name) is compared with the lines kept from it (`common_prefix`) and recorded on its CodexSource (`events`,
shown on the session page):
- it still starts with everything read: reading goes on after it ("resynced");
- it starts with some of what was read: the lines read after that prefix stay (the rollout is append-only) and
  reading goes on from the end of the prefix ("truncated" when nothing follows it, else "resynced");
- it shares not even its first line: it is followed as a new session linked to the old one (`continues`; under a
  new thread id when the old session has the file's thread id), and the old session keeps what it read
  ("replaced").

`Follower` watches a folder with watchdog (inotify where available) and syncs the files whose content events
name (writes, creations, moves; never its own reads), with a periodic rescan as a safety net that only stats
files (events can be missed, e.g. on network filesystems). Followed sessions are read-only: compactweb never
writes into a Codex session it follows (sessions_app.rollout.lease.SessionReadOnly).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from compaction_app.models import CompactionPolicy, Provider
from sessions_app.claude_transcript import is_transcript_file
from sessions_app.codex_rollout import RolloutImportError, parse_rollout, to_compactweb_lines
from sessions_app.codex_rollout.convert import needs_history
from sessions_app.codex_rollout.labels import infer_labels, latest_context_window
from sessions_app.codex_rollout.parse import line_too_long, split_raw_lines
from sessions_app.codex_rollout.tail import (
    GROWN,
    REWRITTEN,
    UNCHANGED,
    NewLines,
    ReadState,
    common_prefix,
    file_change,
    first_line,
    head_digest,
    is_rollout_file,
    read_new_lines,
    tail_digest,
)
from sessions_app.compactions import usage_lines
from sessions_app.models import CodexSource, CodexSourceLine, LiveItem, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import append_rollout_lines
from sessions_app.transfer import claude_follow, codex_sources, importer, live_alerts
from sessions_app.transfer.refusals import AlreadyImported, TransferRefused

logger = logging.getLogger(__name__)

# How many earlier lines of the file are re-read to label a compaction that arrives (its turn started there).
LABEL_CONTEXT_LINES = 400


@dataclass(frozen=True)
class SyncResult:
    path: str
    action: str  # imported, appended, waiting, unchanged, truncated, resynced, replaced, refused
    session_id: int | None = None
    lines: int = 0
    detail: str = ""


def is_followed_file(path: Path) -> bool:
    """A Codex rollout (`rollout-*.jsonl`) or a Claude Code transcript (`<session id>.jsonl`, issue 35): one
    follower serves `~/.codex/sessions`, `~/.claude/projects` or a folder holding both."""
    return is_rollout_file(path) or is_transcript_file(path)


def scan_folder(root: Path, matches: Callable[[Path], bool] = is_followed_file, *,
                resolved: Path | None = None) -> tuple[list[Path], list[Path]]:
    """The followed files under a sessions folder (Codex's YYYY/MM/DD tree), oldest path first, and apart the
    ones that lead out of it (`leads_outside`): those are never read. `resolved` is the folder with its symlinks
    resolved, when the caller has it (resolved here once per scan otherwise, not once per file)."""
    resolved = root.resolve() if resolved is None else resolved
    inside, outside = [], []
    for path in sorted(f for f in root.rglob("*") if matches(f) and f.is_file()):
        (outside if leads_outside(resolved, path) else inside).append(path)
    return inside, outside


def rollout_files(root: Path, matches: Callable[[Path], bool] = is_followed_file, *,
                  resolved: Path | None = None) -> list[Path]:
    """The followed files under a sessions folder, oldest path first (none that leads out of it)."""
    return scan_folder(root, matches, resolved=resolved)[0]


def leads_outside(resolved_root: Path, path: Path) -> bool:
    """Whether a file in the followed folder (`resolved_root`: the folder with its own symlinks resolved) is, once
    its symlinks are resolved, somewhere else: following it would read (and an export give back) a file the
    folder's owner never put there (issue 44)."""
    return not path.resolve().is_relative_to(resolved_root)


def outside_refusal(resolved_root: Path, path: Path) -> SyncResult:
    """What a follower says of a file that leads out of its folder: it is not read."""
    target = path.resolve()
    return SyncResult(str(path), "refused", detail=f"{path} leads to {target}, outside the followed folder "
                      f"{resolved_root}: not followed")


def say(result: SyncResult, on_result: Callable[[SyncResult], None] | None) -> None:
    """Say a result once: to the caller that takes results (the follow command prints them), else in the log (the
    embedded follower has no caller). Both at once printed every refusal twice on the command's terminal, whose
    log goes to the console too."""
    if on_result is not None:
        on_result(result)
    elif result.action == "refused":
        logger.warning("follow: %s", result.detail)


def sync_file(*, path: Path, provider: Provider | None = None, policy: CompactionPolicy | None = None) -> SyncResult:
    """Bring the session of one rollout file up to date with the file (see the module docstring)."""
    key = str(path.resolve())
    source = CodexSource.objects.filter(path=key, followed=True).first()
    if not path.exists():
        return SyncResult(key, "unchanged", source.session_id if source else None, detail="the file is gone")
    if source is None:
        return _import_new(path, key, provider, policy)
    change = _change(path, source)
    if change == UNCHANGED:
        return SyncResult(key, "unchanged", source.session_id)
    if change == GROWN:
        return _append(path, source)
    assert change == REWRITTEN
    return _rewritten(path, source, provider, policy)


def _change(path: Path, source: CodexSource) -> str:
    if source.tail or source.inode:
        return file_change(path, state=ReadState(offset=source.offset, tail=source.tail, inode=source.inode))
    # A source read before the tail digest existed: its first line tells whether it is the same file.
    line = first_line(path)
    if source.head and (line is None or head_digest(line) != source.head):
        return REWRITTEN
    size = path.stat().st_size
    return REWRITTEN if size < source.offset else UNCHANGED if size == source.offset else GROWN


def _state(new: NewLines, **more) -> dict:
    return {"offset": new.offset, "tail": new.tail, "inode": new.inode, **more}


def _import_new(path: Path, key: str, provider, policy, *, continues: Session | None = None) -> SyncResult:
    head = first_line(path)
    if head is None:
        return SyncResult(key, "waiting", detail="no complete first line yet")
    new = read_new_lines(path, 0)
    too_long = long_line_refusal(new.lines, first_number=1, name=path.name)
    if too_long is not None:
        return SyncResult(key, "refused", detail=str(too_long))
    followed = importer.FollowedFile(path=key, state=_state(new, head=head_digest(head)), continues=continues)
    try:
        # Committed in batches; the read state lands with the import's last transaction.
        result = import_followed(lines=new.lines, source_name=path.name, provider=provider, policy=policy,
                                 followed=followed)
    except AlreadyImported as exc:
        return SyncResult(key, "refused", exc.session_id, detail=str(exc))
    except (RolloutImportError, TransferRefused) as exc:
        return SyncResult(key, "refused", detail=str(exc))
    logger.info("follow: imported %s as session %s (%s lines)", key, result.session.pk, len(new.lines))
    return SyncResult(key, "imported", result.session.pk, len(new.lines))


def import_followed(*, followed: importer.FollowedFile, **kwargs) -> importer.ImportResult:
    """Import a followed (or shipped) file. A rewritten file that `continues` a session keeps that session's
    thread id: refused as already imported, it is imported under a new id, the old one kept as forked_from_id."""
    try:
        return importer.do_import_rollout(followed=followed, **kwargs)
    except AlreadyImported:
        if followed.continues is None:
            raise
        return importer.do_import_rollout(followed=followed, new_thread_id=True, **kwargs)


def long_line_refusal(lines: list[bytes], *, first_number: int, name: str) -> RolloutImportError | None:
    """The refusal of lines one of which is past COMPACTWEB_MAX_IMPORT_LINE_BYTES (issue 27), as an import refuses
    it; None when every line fits."""
    limit = settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES
    index = next((i for i, line in enumerate(lines) if len(line.rstrip(b"\n")) > limit), None)
    return None if index is None else line_too_long(first_number + index, max_line_bytes=limit, source_name=name)


def record_file_event(source: CodexSource, *, action: str, detail: str, session_id: int | None = None, what: str = "rewritten",
            **fields) -> None:
    """Note on a followed file's CodexSource what happened to it and what was done (shown on its session page)."""
    event = {"at": timezone.now().isoformat(), "what": what, "action": action, "detail": detail}
    if session_id is not None:
        event["session"] = session_id
    source.events = [*source.events, event]
    CodexSource.objects.filter(pk=source.pk).update(events=source.events, updated_at=timezone.now(), **fields)
    for name, value in fields.items():
        setattr(source, name, value)


def _rewritten(path: Path, source: CodexSource, provider, policy) -> SyncResult:
    """The file no longer extends what was read: find how much of it still does, record what happened and
    follow it on (the module docstring)."""
    if first_line(path) is None:
        return SyncResult(source.path, "waiting", source.session_id, detail="rewritten; no complete first line yet")
    kept = (CodexSourceLine.objects.filter(source=source).order_by("number")
            .values_list("text", flat=True).iterator(chunk_size=codex_sources.BATCH))
    prefix = common_prefix(path, kept)
    size = path.stat().st_size
    if prefix.lines == 0:
        key = source.path
        CodexSource.objects.filter(pk=source.pk).update(path="")
        imported = _import_new(path, key, provider, policy, continues=source.session)
        detail = (f"the file was rewritten and shares no line with what was read; session {source.session_id} keeps "
                  f"its {source.line_count} lines" + (f" and the file is followed as session {imported.session_id}"
                                                      if imported.session_id else f" ({imported.detail})"))
        record_file_event(source, action="new_session", detail=detail, session_id=imported.session_id)
        logger.warning("follow: %s", detail)
        return SyncResult(key, "replaced" if imported.action == "imported" else imported.action,
                          imported.session_id, imported.lines, detail)
    if prefix.lines == source.line_count:
        action, detail = "resynced", (f"the file was rewritten but still starts with the {prefix.lines} lines read; "
                                      "reading goes on after them")
    elif prefix.offset == size:
        action, detail = "truncated", (
            f"the file was cut back from {source.offset} to {size} bytes (its first {prefix.lines} lines, as read "
            f"before); the {source.line_count - prefix.lines} lines read after them stay (the rollout is "
            "append-only) and reading goes on from its new end")
    else:
        action, detail = "resynced", (
            f"the file was rewritten: its first {prefix.lines} lines are as read before, line {prefix.lines + 1} on "
            f"differs; the {source.line_count - prefix.lines} lines read after them stay (the rollout is "
            f"append-only) and the file's new lines from line {prefix.lines + 1} on are read on")
    record_file_event(source, action=action, detail=detail, offset=prefix.offset,
            tail=tail_digest(path, prefix.offset), inode=os.stat(path).st_ino)
    logger.warning("follow: %s: %s", source.path, detail)
    appended = _append(path, source) if size > prefix.offset else None
    return SyncResult(source.path, action, source.session_id, appended.lines if appended else 0, detail)


def _append(path: Path, source: CodexSource) -> SyncResult:
    new = read_new_lines(path, source.offset)
    if not new.lines:
        return SyncResult(source.path, "waiting", source.session_id, detail="a partial line waits for its newline")
    too_long = long_line_refusal(new.lines, first_number=source.line_count + 1, name=source.name)
    if too_long is not None:
        # Nothing of the batch is appended and the offset stays: the session stops before the long line, and
        # the refusal is recorded once on the session page (the next growth of the file is refused the same way).
        detail = f"{too_long}; the session stops before it and the file is not read on"
        if not source.events or source.events[-1].get("detail") != detail:
            record_file_event(source, action="refused", detail=detail, what="line too long")
            logger.warning("follow: %s: %s", source.path, detail)
        return SyncResult(source.path, "refused", source.session_id, detail=detail)
    with transaction.atomic():
        locked = CodexSource.objects.select_for_update().get(pk=source.pk)
        if locked.offset != source.offset:  # another follower got there first
            return SyncResult(source.path, "unchanged", source.session_id)
        count = do_append_followed_lines(source=locked, lines=new.lines)
        CodexSource.objects.filter(pk=locked.pk).update(**_state(new), updated_at=timezone.now())
    return SyncResult(source.path, "appended", source.session_id, count)


def do_append_followed_lines(*, source: CodexSource, lines: list[bytes]) -> int:
    """Append lines Codex added to a followed file: tolerant parse, the same conversion and labels as an import,
    the file's lines kept as read. Runs inside the caller's transaction. Returns the lines read."""
    if claude_follow.is_claude_source(source):
        return claude_follow.do_append_claude_lines(source=source, lines=lines)
    session = Session.objects.select_related("provider", "policy").get(pk=source.session_id)
    raw = split_raw_lines(lines)
    first_number = source.line_count + 1
    parsed = parse_rollout([r.raw for r in raw], source_name=source.name, strict=False)
    parsed = _renumbered(parsed, first_number - 1)
    # Most lines convert without the history before them; reading it would cost the session's size per line.
    history = (list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))
               if needs_history(parsed.lines) else [])
    converted = [x for x in to_compactweb_lines(parsed, history=history) if x.kind != p.SESSION_META]
    new_lines, numbers, _, problems = importer.validated_lines(converted, strict=False)
    before = live_alerts.history_before(session=session, kinds=[line.kind for line in new_lines])
    rows = append_rollout_lines(session=session, lines=new_lines) if new_lines else []
    seq_by_line = dict(zip(numbers, (r.seq for r in rows), strict=True))
    codex_sources.append_source_lines(source=source, raw=raw, seq_by_line=seq_by_line, first_number=first_number)
    codex_sources.add_problems(source=source, problems=[*parsed.problems, *problems])
    if any(r.kind == p.COMPACTED for r in rows):
        labels = _labels_with_context(source, parsed, first_number)
        importer.create_compactions(session, rows, {seq_by_line[n]: lab for n, lab in labels.items()
                                                     if n in seq_by_line}, live=True)
    # Usage lines read after their compaction was (the file was read between the two writes).
    usage_lines.add_late_usage(session_id=session.pk, rows=rows)
    if not any(r.kind == p.COMPACTED for r in rows):  # else create_compactions read them
        usage_lines.add_reread_lines(session_id=session.pk, rows=rows)
    live_alerts.run_alert_rules(session=session, rows=rows, before=before)
    window = latest_context_window(parsed.lines)
    if window and window != source.context_window:
        # The window Codex reports reaches the meters as soon as it appears (a new file has none yet).
        CodexSource.objects.filter(pk=source.pk).update(context_window=window)
        provider = importer.provider_for_window(session.provider, window)
        if provider.pk != session.provider_id:
            Session.objects.filter(pk=session.pk).update(provider=provider)
    if session.title.startswith(importer.UNTITLED_PREFIX):
        title = importer.title_from_lines(parsed.lines, kind=importer.FOLLOWED_TITLE)
        if title:
            Session.objects.filter(pk=session.pk).update(title=title)
    return len(raw)


def _renumbered(parsed, shift: int):
    """The parse of appended lines with file line numbers (they were numbered from 1)."""
    from dataclasses import replace

    return replace(
        parsed,
        lines=[replace(line, line_no=line.line_no + shift) for line in parsed.lines],
        problems=[replace(x, line_no=x.line_no + shift) for x in parsed.problems],
    )


def _labels_with_context(source: CodexSource, parsed, first_number: int):
    """Labels for appended compactions, read with the turn they belong to (earlier lines of the file)."""
    earlier = list(
        CodexSourceLine.objects.filter(source=source, number__lt=first_number,
                                       number__gte=max(1, first_number - LABEL_CONTEXT_LINES))
        .order_by("number").values_list("number", "text")
    )
    before = parse_rollout([text for _, text in earlier], strict=False)
    shift = earlier[0][0] - 1 if earlier else 0
    before = _renumbered(before, shift)
    return infer_labels([*before.lines, *parsed.lines])


def sync_folder(*, root: Path, provider=None, policy=None) -> list[SyncResult]:
    """Sync every rollout file under `root`; a file that leads out of it is refused, unread (the refusal is among
    the results: the caller says it)."""
    resolved = root.resolve()
    inside, outside = scan_folder(root, resolved=resolved)
    refusals = [outside_refusal(resolved, path) for path in outside]
    return [*refusals, *(sync_file(path=path, provider=provider, policy=policy) for path in inside)]


# The watchdog events that mean a file's content may have changed. Opening, reading and closing a file unwritten
# are events too (inotify reports them); reacting to them made the follower's own reads trigger more reads.
CONTENT_EVENTS = frozenset({"created", "modified", "moved", "closed"})


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class Follower:
    """Follows a folder until stopped: watchdog content events trigger a sync of the file they name, and every
    `rescan_seconds` the whole folder is looked at (missed events, files that existed at start).

    A file is synced only when its stat (size, mtime, inode) differs from the one seen at its last sync, so an
    idle folder costs a stat per file per rescan and no database query. The format is the caller's: `matches`
    picks the followed files by path and `sync` brings one up to date (Codex rollouts and Claude Code transcripts
    by default)."""

    def __init__(self, root: Path, *, provider=None, policy=None, rescan_seconds: float = 5.0,
                 matches: Callable[[Path], bool] = is_followed_file,
                 sync: Callable[..., SyncResult] = sync_file) -> None:
        self.root = Path(root)
        self.provider, self.policy = provider, policy
        self.rescan_seconds = rescan_seconds
        self.matches, self.sync = matches, sync
        self._queue: queue.Queue[Path | None] = queue.Queue()
        self._stop = threading.Event()
        self._observer = None
        self._seen: dict[Path, tuple[int, int, int]] = {}
        self._refused: set[Path] = set()  # files leading out of the folder, said once each
        self._resolved: Path | None = None  # the folder with its symlinks resolved, once (`resolved_root`)
        self.syncs = 0  # sync calls made (the bench and tests read it)

    @property
    def resolved_root(self) -> Path:
        """The followed folder with its symlinks resolved: resolved once, not on every event and every file of a
        rescan (the folder itself does not move while it is followed)."""
        if self._resolved is None:
            self._resolved = self.root.resolve()
        return self._resolved

    def notify(self, path: str | Path) -> None:
        path = Path(path)
        if self.matches(path):
            self._queue.put(path)

    def pending(self) -> int:
        return self._queue.qsize()

    def handler(self):
        """The watchdog handler: content events name a file to sync; opening, reading and closing unwritten do not."""
        from watchdog.events import FileSystemEventHandler

        follower = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):
                if event.is_directory or event.event_type not in CONTENT_EVENTS:
                    return
                for name in (getattr(event, "dest_path", ""), event.src_path):
                    if name:
                        follower.notify(name)

        return Handler()

    def _start_observer(self) -> None:
        from watchdog.observers import Observer

        self.root.mkdir(parents=True, exist_ok=True)
        self._resolved = None  # resolved again once it exists (a folder made here may sit behind a symlink)
        self._observer = Observer()
        self._observer.schedule(self.handler(), str(self.root), recursive=True)
        self._observer.start()

    def run(self, *, on_result=None, on_caught_up=None) -> None:
        """Follow until `stop()`; `on_result` is called with every SyncResult that changed something,
        `on_caught_up` with the number of files once the first look at the folder is done."""
        self._start_observer()
        try:
            self.rescan(on_result)
            if on_caught_up is not None:
                on_caught_up(len(self._seen))
            while not self._stop.is_set():
                try:
                    path = self._queue.get(timeout=self.rescan_seconds)
                except queue.Empty:
                    self.rescan(on_result)
                    continue
                if path is None:
                    break
                pending = {path}
                while not self._queue.empty():  # coalesce a burst of events for the same files
                    more = self._queue.get_nowait()
                    if more is not None:
                        pending.add(more)
                for one in sorted(pending):
                    self._sync(one, on_result)
        finally:
            if self._observer is not None:
                self._observer.stop()
                self._observer.join(timeout=5)
            close_old_connections()

    def rescan(self, on_result=None) -> None:
        """Look at every followed file; sync those whose stat changed since their last sync."""
        for path in rollout_files(self.root, self.matches, resolved=self.resolved_root):
            self._sync(path, on_result)

    def _sync(self, path: Path, on_result) -> None:
        if leads_outside(self.resolved_root, path):
            if path not in self._refused:
                self._refused.add(path)
                say(outside_refusal(self.resolved_root, path), on_result)
            return
        self._refused.discard(path)
        signature = _signature(path)
        if signature is None or self._seen.get(path) == signature:
            return  # gone, or not changed since its last sync
        close_old_connections()
        self.syncs += 1
        try:
            result = self.sync(path=path, provider=self.provider, policy=self.policy)
        except Exception:  # one bad file must not stop the follower
            logger.exception("follow: syncing %s failed", path)
            return
        # The stat taken before the sync: a write during it changes the stat again, so it is read next time.
        self._seen[path] = signature
        if on_result is not None and result.action not in ("unchanged", "waiting"):
            on_result(result)

    def stop(self) -> None:
        self._stop.set()
        self._queue.put(None)


_embedded: Follower | None = None
_embedded_lock = threading.Lock()


def start_from_settings() -> Follower | None:
    """The embedded follower: a background thread in the dashboard process when COMPACTWEB_FOLLOW_ROLLOUTS_DIR
    names a folder (the embedded default; scaled out, run `manage.py follow_rollouts DIR` once instead)."""
    global _embedded
    from django.conf import settings

    folder = getattr(settings, "COMPACTWEB_FOLLOW_ROLLOUTS_DIR", "")
    if not folder:
        return None
    with _embedded_lock:
        if _embedded is None:
            _embedded = Follower(Path(folder))
            threading.Thread(target=_embedded.run, name="compactweb-follow-rollouts", daemon=True).start()
    return _embedded
