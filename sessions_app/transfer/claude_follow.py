"""Following a Claude Code transcript (issue 35): the lines Claude Code appends, placed in its conversation tree.

A transcript's new lines can only be converted with the tree read so far (which entry is the live leaf, which
items each entry added), so the follower keeps a `TranscriptReader` per followed file, in process, and rebuilds it
from the file's kept lines (CodexSourceLine) when it has none or when it is behind (after a restart, or another
follower appended meanwhile): restart-safe with no duplicates, like a Codex rollout (the offset is stored with
the lines, sessions_app.transfer.follow).
"""

from __future__ import annotations

import threading

from sessions_app.claude_transcript import FORMAT, TranscriptReader
from sessions_app.codex_rollout.parse import split_raw_lines
from sessions_app.models import CodexSource, CodexSourceLine, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import append_rollout_lines
from sessions_app.transfer import codex_sources, importer, live_alerts

# source pk → (the source's created_at, lines fed, reader): a row's pk alone may name another file after a delete
# (SQLite reuses the highest rowid), so its creation time is checked too.
_readers: dict[int, tuple[object, int, TranscriptReader]] = {}
_lock = threading.Lock()
MAX_READERS = 256


def is_claude_source(source: CodexSource) -> bool:
    """Whether a followed file is a Claude Code transcript (its session_meta says so)."""
    return RolloutLine.objects.filter(session_id=source.session_id, kind=p.SESSION_META,
                                      payload__format=FORMAT).exists()


def _reader(source: CodexSource) -> TranscriptReader:
    with _lock:
        cached = _readers.pop(source.pk, None)
    if cached is not None and cached[:2] == (source.created_at, source.line_count):
        return cached[2]
    reader = TranscriptReader()
    texts = (CodexSourceLine.objects.filter(source=source).order_by("number")
             .values_list("text", flat=True).iterator(chunk_size=codex_sources.BATCH))
    reader.feed(texts, first_line_no=1)
    return reader


def do_append_claude_lines(*, source: CodexSource, lines: list[bytes]) -> int:
    """Append what Claude Code added to a followed transcript (inside the caller's transaction): the same
    conversion and labels as an import, the file's lines kept as read. Returns the lines read."""
    session = Session.objects.get(pk=source.session_id)
    raw = split_raw_lines(lines)
    first_number = source.line_count + 1
    reader = _reader(source)
    chunk = reader.feed([r.raw for r in raw], first_line_no=first_number)
    new_lines, numbers, _, problems = importer.validated_lines(chunk.lines, strict=False)
    before = live_alerts.history_before(session=session, kinds=[line.kind for line in new_lines])
    rows = append_rollout_lines(session=session, lines=new_lines) if new_lines else []
    seq_by_line = dict(zip(numbers, (r.seq for r in rows), strict=True))
    codex_sources.append_source_lines(source=source, raw=raw, seq_by_line=seq_by_line, first_number=first_number)
    codex_sources.add_problems(source=source, problems=[*chunk.problems, *problems])
    if any(r.kind == p.COMPACTED for r in rows):
        importer.create_compactions(session, rows, {seq_by_line[n]: label for n, label in chunk.labels.items()
                                                     if n in seq_by_line}, live=True)
    importer.record_claude_call_tokens(session, [r.payload for r in rows if r.kind == p.EVENT_MSG])
    live_alerts.run_alert_rules(session=session, rows=rows, before=before)
    # A transcript names its model with its first answer: from then on the session has the model's own window.
    provider = importer.provider_for_claude_model(session.provider, reader.meta.model)
    if provider.pk != session.provider_id:
        Session.objects.filter(pk=session.pk).update(provider=provider)
    title = importer.titled(reader.first_prompt, kind=importer.FOLLOWED_TITLE)
    if session.title.startswith(importer.UNTITLED_PREFIX) and title:
        Session.objects.filter(pk=session.pk).update(title=title)
    with _lock:
        if len(_readers) >= MAX_READERS:
            _readers.pop(next(iter(_readers)))
        _readers[source.pk] = (source.created_at, first_number - 1 + len(raw), reader)
    return len(raw)


def forget_readers() -> None:
    """Drop every kept reader (a test simulating a restarted follower)."""
    with _lock:
        _readers.clear()
