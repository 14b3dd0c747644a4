"""The Codex rollout files behind imported and followed sessions (issue 13, items 3 and 4).

An imported file's lines are kept exactly as they were read (`CodexSourceLine`), next to the rollout lines they
became, so that:
- the export of an imported session gives back the file byte for byte, then what compactweb added after the
  import (its own lines in Codex's format, numbered on from the file's last `ordinal`); a last line that had no
  newline gets one only when something follows it;
- the export keeps the file's name;
- a follower (sessions_app.transfer.follow) knows how far it has read (`offset`) and which file it reads (`head`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from django.db.models import Max

from sessions_app.claude_transcript import FORMAT as CLAUDE_FORMAT
from sessions_app.codex_rollout import export_lines
from sessions_app.codex_rollout.parse import LineProblem, RawLine
from sessions_app.models import CodexSource, CodexSourceLine, RolloutLine, Session
from sessions_app.rollout.selectors import rollout_line_dicts

BATCH = 2000


def has_source(*, session: Session) -> bool:
    return CodexSource.objects.filter(session=session).exists()


def store_source(
    *,
    session: Session,
    name: str,
    raw: Sequence[RawLine],
    seq_by_line: dict[int, int],
    problems: list[LineProblem],
    context_window: int | None = None,
    path: str = "",
    offset: int = 0,
    head: str = "",
) -> CodexSource:
    """Keep a file's lines as read (inside the caller's transaction)."""
    source = CodexSource.objects.create(
        session=session, name=name, path=path, followed=bool(path), offset=offset, head=head,
        context_window=context_window, problems=[x.as_dict() for x in problems],
    )
    append_source_lines(source=source, raw=raw, seq_by_line=seq_by_line, first_number=1)
    return source


def append_source_lines(*, source: CodexSource, raw: Sequence[RawLine], seq_by_line: dict[int, int],
                        first_number: int) -> None:
    """Keep more lines of the file (numbered from `first_number`); `seq_by_line` maps a file line number to the
    rollout line it became."""
    rows = [
        CodexSourceLine(source=source, number=first_number + i, text=line.text, terminated=line.terminated,
                        rollout_seq=seq_by_line.get(first_number + i))
        for i, line in enumerate(raw)
    ]
    CodexSourceLine.objects.bulk_create(rows, batch_size=BATCH)
    CodexSource.objects.filter(pk=source.pk).update(line_count=first_number - 1 + len(rows))
    source.line_count = first_number - 1 + len(rows)


def add_problems(*, source: CodexSource, problems: Sequence[LineProblem]) -> None:
    """Note more problems of a followed file (lines skipped or repaired as they were appended)."""
    if problems:
        CodexSource.objects.filter(pk=source.pk).update(problems=[*source.problems, *(x.as_dict() for x in problems)])


def last_source_seq(*, source: CodexSource) -> int:
    """The seq of the newest rollout line that came from the file (0 when none did)."""
    return CodexSourceLine.objects.filter(source=source).aggregate(m=Max("rollout_seq"))["m"] or 0


def _last_ordinal(text: str) -> int | None:
    try:
        value = json.loads(text).get("ordinal")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def export_with_source(*, session: Session, chunk_size: int = 1000) -> Iterator[str]:
    """The file's lines as they came in, then compactweb's later lines in Codex's format."""
    source = CodexSource.objects.get(session=session)
    after_number = 0
    last: CodexSourceLine | None = None
    ordinal: int | None = None
    while True:
        chunk = list(CodexSourceLine.objects.filter(source=source, number__gt=after_number)
                     .order_by("number")[:chunk_size])
        if not chunk:
            break
        for line in chunk:
            if last is not None:
                yield last.text + "\n"
            last = line
            ordinal = _last_ordinal(line.text) if line.text.lstrip().startswith("{") else ordinal
        after_number = chunk[-1].number
    upto = last_source_seq(source=source)
    added = export_lines(rollout_line_dicts(session_id=session.pk, chunk_size=chunk_size, after=upto), session_meta=None,
                         first_ordinal=None if ordinal is None else ordinal + 1)
    first_added = next(added, None)
    if last is not None:
        yield last.text + ("\n" if last.terminated or first_added is not None else "")
    if first_added is not None:
        yield first_added
        yield from added


def export_filename(*, session: Session) -> str:
    """The imported file's name; else Codex's pattern with the session's start: for an imported session the
    time its session_meta gives (not the time of the import), for a native one its creation."""
    source = CodexSource.objects.filter(session=session).values_list("name", flat=True).first()
    if (source and source.endswith(".jsonl") and (source.startswith("rollout-") or _is_claude_name(source))
            and _plain_name(source)):
        return source
    started = session.created_at
    if source is not None:
        first = (RolloutLine.objects.filter(session=session).order_by("seq")
                 .values_list("timestamp", flat=True).first())
        started = first or started
    return f"rollout-{started:%Y-%m-%dT%H-%M-%S}-{session.thread_id}.jsonl"


def _plain_name(name: str) -> bool:
    """A name that is one file's name and nothing more: no folder, no control character, no quote (the archive
    writes the file under it; a header or a shell would read more into it)."""
    return name.isprintable() and not any(c in name for c in '/\\"') and name not in (".", "..")


def _is_claude_name(name: str) -> bool:
    """Claude Code names a transcript `<session id>.jsonl` (issue 35)."""
    try:
        uuid.UUID(name.removesuffix(".jsonl"))
    except ValueError:
        return False
    return True


def line_count(*, session_id: int) -> int | None:
    """How many lines of the session's file have been read (None: the session came from no file)."""
    return CodexSource.objects.filter(session_id=session_id).values_list("line_count", flat=True).first()


def source_summary(*, session: Session) -> dict[str, Any] | None:
    """What the session page says about a session's Codex file: name, followed, lines, problems, what happened to
    a followed file (a rewrite: `events`) and the sessions a rewrite links (`continues`, `continued_by`)."""
    source = CodexSource.objects.filter(session=session).first()
    if source is None:
        return None
    continued_by = list(CodexSource.objects.filter(continues=session).values_list("session_id", flat=True))
    claude = is_claude_session(session=session)
    return {"name": source.name, "followed": source.followed, "lines": source.line_count,
            "context_window": source.context_window, "problems": source.problems, "events": source.events,
            "continues": source.continues_id, "continued_by": continued_by,
            "format": CLAUDE_FORMAT if claude else "codex", "counting": token_counting(session=session) if claude else None,
            "thinking": thinking_blocks(source=source) if claude else [],
            "subagents": subagent_files(source=source) if claude else []}


THINKING_SHOWN = 20
THINKING_LOOKBACK_LINES = 5000  # the page reads the newest lines only, whatever the transcript's length


def thinking_blocks(*, source: CodexSource, limit: int = THINKING_SHOWN) -> list[dict[str, Any]]:
    """The newest `limit` thinking blocks of a Claude Code transcript, verbatim, oldest first, read from the file's
    kept lines (issue 35). They are not history items: Claude Code does not send an ended turn's thinking back to
    the model, so the live history leaves them out; the session page shows them beside it. A block the server
    redacted (`redacted_thinking`) is listed without its text."""
    rows = (CodexSourceLine.objects.filter(source=source, text__contains="thinking",
                                           number__gt=source.line_count - THINKING_LOOKBACK_LINES)
            .order_by("-number").values_list("number", "text"))
    newest: list[dict[str, Any]] = []
    for number, text in rows.iterator(chunk_size=100):
        try:
            entry = json.loads(text)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "assistant" else None
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        for block in reversed(blocks):
            if block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
                newest.append({"line": number, "text": block["thinking"], "redacted": False})
            elif block.get("type") == "redacted_thinking":
                newest.append({"line": number, "text": "", "redacted": True})
        if len(newest) >= limit:
            break
    return newest[:limit][::-1]


def subagent_files(*, source: CodexSource) -> list[dict[str, Any]]:
    """The subagent transcripts Claude Code wrote beside a followed transcript (`<session id>/subagents/*.jsonl`,
    the sidechains of its Task tool): listed on the parent session's page, not followed as sessions of their own."""
    if not source.path or source.path.startswith("shipped:"):
        return []
    folder = Path(source.path).with_suffix("") / "subagents"
    try:
        files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        return [{"name": f.name, "bytes": f.stat().st_size} for f in files[:100] if f.is_file()]
    except OSError:
        return []


def is_claude_session(*, session: Session) -> bool:
    """Whether the session came from a Claude Code transcript (its pages speak Claude Code's terms: issue 47)."""
    return _format(session) == CLAUDE_FORMAT


def _format(session: Session) -> str:
    meta = (RolloutLine.objects.filter(session=session, kind="session_meta").order_by("seq")
            .values_list("payload", flat=True).first()) or {}
    return str(meta.get("format") or "codex")


def token_counting(*, session: Session) -> dict[str, Any]:
    """Which of a session's tokens in window the model's server reported and which compactweb estimated (issue 35).

    The meter starts from the newest server usage (a `token_count` line) and adds its own count of every item since;
    a compaction or rollback installs an estimate of the whole new history instead. Claude models are not counted
    with tiktoken, so for a Claude Code session compactweb's counts (o200k_base) are estimates, labelled as such:
    `server_reported` is the newest usage Anthropic's server reported (None when an estimate replaced it since),
    `estimated` the tokens compactweb counted on top of it (or all of them), `at_seq` the usage line."""
    session = Session.objects.select_related("provider", "policy").get(pk=session.pk)  # the meter as it is now
    lines = RolloutLine.objects.filter(session=session)
    usage = (lines.filter(kind="event_msg", payload__type="token_count").exclude(payload__source="estimate")
             .order_by("-seq").values_list("seq", flat=True).first())
    installed = (lines.filter(kind__in=("compacted", "rollback", "redo")).order_by("-seq")
                 .values_list("seq", flat=True).first())
    total = session.tokens_in_window
    server = session.meter_usage_total if usage is not None and (installed is None or usage > installed) else None
    estimator = session.policy.counter_name(session.provider)
    return {"tokens_in_window": total, "server_reported": server, "at_seq": usage if server is not None else None,
            "estimated": total - (server or 0), "estimator": estimator,
            "note": (f"Claude models do not use tiktoken: compactweb's own counts ({estimator}) are estimates; "
                     "the figures Anthropic's server reported are exact")}
