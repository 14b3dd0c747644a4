"""Live follow of a Codex sessions folder (issue 13, item 4; design user story 8).

`sync_file` brings one `rollout-*.jsonl` file up to date: a new file (once it has a complete first line) is
imported as a session with source "followed" (tolerant, like any import), and lines Codex appends later are
appended to that session's rollout as they arrive; a partial last line waits for its newline. The byte offset
read so far is stored with the lines in the same transaction, so a restarted follower resumes where it stopped,
with no duplicates. A file cut back (truncated) is noted and read on from its new end (what was read stays: the
rollout is append-only); a file replaced under the same name (its first line differs: rotation, rewrite) is
taken as a new file, and the old session stays as it was.

`Follower` watches a folder with watchdog (inotify where available) and syncs the files it is told about,
with a periodic rescan as a safety net (events can be missed, e.g. on network filesystems). Followed sessions
are read-only: compactweb never writes into a Codex session it follows (sessions_app.rollout.lease.SessionReadOnly).
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from django.db import close_old_connections, transaction

from compaction_app.models import CompactionPolicy, Provider
from sessions_app.codex_rollout import RolloutImportError, parse_rollout, to_compactweb_lines
from sessions_app.codex_rollout.labels import infer_labels, latest_context_window
from sessions_app.codex_rollout.parse import LineProblem, split_raw_lines
from sessions_app.codex_rollout.tail import (
    GROWN,
    REPLACED,
    TRUNCATED,
    UNCHANGED,
    file_change,
    first_line,
    head_digest,
    is_rollout_file,
    read_new_lines,
)
from sessions_app.models import CodexSource, CodexSourceLine, LiveItem, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import append_rollout_lines
from sessions_app.transfer import codex_sources, importer
from sessions_app.transfer.refusals import AlreadyImported, TransferRefused

logger = logging.getLogger(__name__)

# How many earlier lines of the file are re-read to label a compaction that arrives (its turn started there).
LABEL_CONTEXT_LINES = 400


@dataclass(frozen=True)
class SyncResult:
    path: str
    action: str  # imported, appended, waiting, unchanged, truncated, replaced, refused
    session_id: int | None = None
    lines: int = 0
    detail: str = ""


def rollout_files(root: Path) -> list[Path]:
    """Codex's rollout files under a sessions folder (its YYYY/MM/DD tree), oldest path first."""
    return sorted(f for f in root.rglob("rollout-*.jsonl") if f.is_file())


def sync_file(*, path: Path, provider: Provider | None = None, policy: CompactionPolicy | None = None) -> SyncResult:
    """Bring the session of one rollout file up to date with the file (see the module docstring)."""
    key = str(path.resolve())
    source = CodexSource.objects.filter(path=key, followed=True).select_related("session").first()
    if not path.exists():
        return SyncResult(key, "unchanged", source.session_id if source else None, detail="the file is gone")
    if source is not None:
        change = file_change(path, offset=source.offset, head=source.head)
        if change == UNCHANGED:
            return SyncResult(key, "unchanged", source.session_id)
        if change == REPLACED:
            # Another file under the same name: the old session keeps what it read, the new file starts over.
            CodexSource.objects.filter(pk=source.pk).update(path="")
            logger.info("follow: %s was replaced; session %s keeps what it read", key, source.session_id)
            imported = _import_new(path, key, provider, policy)
            return SyncResult(key, "replaced", imported.session_id, imported.lines, imported.detail)
        if change == TRUNCATED:
            return _truncated(path, source)
        assert change == GROWN
        return _append(path, source)
    return _import_new(path, key, provider, policy)


def _import_new(path: Path, key: str, provider, policy) -> SyncResult:
    head = first_line(path)
    if head is None:
        return SyncResult(key, "waiting", detail="no complete first line yet")
    new = read_new_lines(path, 0)
    try:
        # Committed in batches; the offset and head land with the import's last transaction.
        result = importer.do_import_rollout(lines=new.lines, source_name=path.name, provider=provider,
                                            policy=policy, follow_path=key, follow_offset=new.offset,
                                            follow_head=head_digest(head))
    except AlreadyImported as exc:
        return SyncResult(key, "refused", exc.session_id, detail=str(exc))
    except (RolloutImportError, TransferRefused) as exc:
        return SyncResult(key, "refused", detail=str(exc))
    logger.info("follow: imported %s as session %s (%s lines)", key, result.session.pk, len(new.lines))
    return SyncResult(key, "imported", result.session.pk, len(new.lines))


def _truncated(path: Path, source: CodexSource) -> SyncResult:
    size = path.stat().st_size
    new = read_new_lines(path, 0)
    note = LineProblem(source.line_count, f"the file was cut back from {source.offset} to {size} bytes; the lines "
                       "read before stay (the rollout is append-only) and reading goes on from its new end",
                       "skipped")
    CodexSource.objects.filter(pk=source.pk).update(offset=new.offset, problems=[*source.problems, note.as_dict()])
    logger.warning("follow: %s was truncated; reading on from byte %s", source.path, new.offset)
    return SyncResult(source.path, "truncated", source.session_id, detail=note.reason)


def _append(path: Path, source: CodexSource) -> SyncResult:
    new = read_new_lines(path, source.offset)
    if not new.lines:
        return SyncResult(source.path, "waiting", source.session_id, detail="a partial line waits for its newline")
    with transaction.atomic():
        locked = CodexSource.objects.select_for_update().get(pk=source.pk)
        if locked.offset != source.offset:  # another follower got there first
            return SyncResult(source.path, "unchanged", source.session_id)
        count = do_append_followed_lines(source=locked, lines=new.lines)
        CodexSource.objects.filter(pk=locked.pk).update(offset=new.offset)
    return SyncResult(source.path, "appended", source.session_id, count)


def do_append_followed_lines(*, source: CodexSource, lines: list[bytes]) -> int:
    """Append lines Codex added to a followed file: tolerant parse, the same conversion and labels as an import,
    the file's lines kept as read. Runs inside the caller's transaction. Returns the lines read."""
    session = Session.objects.select_related("provider", "policy").get(pk=source.session_id)
    raw = split_raw_lines(lines)
    first_number = source.line_count + 1
    parsed = parse_rollout([r.raw for r in raw], source_name=source.name, strict=False)
    parsed = _renumbered(parsed, first_number - 1)
    history = list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))
    converted = [x for x in to_compactweb_lines(parsed, history=history) if x.kind != p.SESSION_META]
    new_lines, numbers, _, problems = importer.validated_lines(converted, strict=False)
    rows = append_rollout_lines(session=session, lines=new_lines) if new_lines else []
    seq_by_line = dict(zip(numbers, (r.seq for r in rows), strict=True))
    codex_sources.append_source_lines(source=source, raw=raw, seq_by_line=seq_by_line, first_number=first_number)
    all_problems = [*parsed.problems, *problems]
    if all_problems:
        CodexSource.objects.filter(pk=source.pk).update(
            problems=[*source.problems, *(x.as_dict() for x in all_problems)])
    if any(r.kind == p.COMPACTED for r in rows):
        labels = _labels_with_context(source, parsed, first_number)
        importer.create_compactions(session, rows, {seq_by_line[n]: lab for n, lab in labels.items()
                                                     if n in seq_by_line})
    window = latest_context_window(parsed.lines)
    if window and window != source.context_window:
        # The window Codex reports reaches the meters as soon as it appears (a new file has none yet).
        CodexSource.objects.filter(pk=source.pk).update(context_window=window)
        provider = importer.provider_for_window(session.provider, window)
        if provider.pk != session.provider_id:
            Session.objects.filter(pk=session.pk).update(provider=provider)
    if session.title.startswith(importer.UNTITLED_PREFIX):
        title = importer.title_from_lines(parsed.lines)
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
    """Sync every rollout file under `root`."""
    return [sync_file(path=path, provider=provider, policy=policy) for path in rollout_files(root)]


class Follower:
    """Follows a Codex sessions folder until stopped: watchdog events trigger a sync of the file they name, and
    every `rescan_seconds` the whole folder is synced (missed events, files that existed at start)."""

    def __init__(self, root: Path, *, provider=None, policy=None, rescan_seconds: float = 5.0) -> None:
        self.root = Path(root)
        self.provider, self.policy = provider, policy
        self.rescan_seconds = rescan_seconds
        self._queue: queue.Queue[Path | None] = queue.Queue()
        self._stop = threading.Event()
        self._observer = None

    def notify(self, path: str | Path) -> None:
        path = Path(path)
        if is_rollout_file(path):
            self._queue.put(path)

    def _start_observer(self) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        follower = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event):
                if event.is_directory:
                    return
                for name in (getattr(event, "dest_path", ""), event.src_path):
                    if name:
                        follower.notify(name)

        self.root.mkdir(parents=True, exist_ok=True)
        self._observer = Observer()
        self._observer.schedule(Handler(), str(self.root), recursive=True)
        self._observer.start()

    def run(self, *, on_result=None) -> None:
        """Follow until `stop()`; `on_result` is called with every SyncResult that changed something."""
        self._start_observer()
        try:
            self._rescan(on_result)
            while not self._stop.is_set():
                try:
                    path = self._queue.get(timeout=self.rescan_seconds)
                except queue.Empty:
                    self._rescan(on_result)
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

    def _rescan(self, on_result) -> None:
        for path in rollout_files(self.root):
            self._sync(path, on_result)

    def _sync(self, path: Path, on_result) -> None:
        close_old_connections()
        try:
            result = sync_file(path=path, provider=self.provider, policy=self.policy)
        except Exception:  # one bad file must not stop the follower
            logger.exception("follow: syncing %s failed", path)
            return
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
